// Prefixed random ids (`acc_…`): unguessable, sortable by nothing, readable in logs.
import { randomBytes } from "node:crypto";

export type IdPrefix = "prj" | "key" | "acc" | "idt" | "otp" | "ses" | "kid" | "wh" | "evt" | "dlv" | "att" | "psk" | "ntc" | "idp" | "xfl";

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBytes(16).toString("base64url")}`;
}
