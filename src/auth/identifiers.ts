// Identifiers are normalized once, at the edge of every service call, so storage and
// comparison never see two spellings of one address.
import { parsePhoneNumberFromString } from "libphonenumber-js/max";
import { z } from "zod";
import { IdentifierRequired, InvalidIdentifier, InvalidRequest } from "../errors.ts";

export type IdentifierKind = "email" | "phone";
export type Identifier = { kind: IdentifierKind; value: string };

const emailSchema = z.email();

export function normalizeEmail(raw: string): string {
  const value = raw.trim().toLowerCase();
  if (value.length > 254 || !emailSchema.safeParse(value).success) {
    throw new InvalidIdentifier("that is not a valid e-mail address");
  }
  return value;
}

export function normalizePhone(raw: string): string {
  const trimmed = raw.trim();
  // E.164 is the contract: a leading + and the country code, no national formats.
  if (!trimmed.startsWith("+")) throw new InvalidIdentifier("phone numbers are written + and country code (E.164)");
  const phone = parsePhoneNumberFromString(trimmed);
  if (!phone || !phone.isValid()) throw new InvalidIdentifier("that is not a valid phone number");
  return phone.number;
}

/** Exactly one of email / phone, each a string when present. */
export function parseIdentifier(input: { email?: unknown; phone?: unknown }): Identifier {
  const hasEmail = input.email !== undefined && input.email !== null;
  const hasPhone = input.phone !== undefined && input.phone !== null;
  if (hasEmail && hasPhone) throw new InvalidRequest("send either email or phone, not both");
  if (!hasEmail && !hasPhone) throw new IdentifierRequired();
  const raw = hasEmail ? input.email : input.phone;
  if (typeof raw !== "string") throw new InvalidRequest(`${hasEmail ? "email" : "phone"} must be a string`);
  if (raw.trim() === "") throw new IdentifierRequired();
  return hasEmail ? { kind: "email", value: normalizeEmail(raw) } : { kind: "phone", value: normalizePhone(raw) };
}
