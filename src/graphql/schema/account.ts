// What every variant of the Account object shows alike: the viewer's Account, the MergedAccount
// it sees, and support staff's SupportAccount (dashboard.ts). Each field is built here once, so
// the variants resolve and describe it the same way; each variant says for itself what differs
// (its id, its merge, its relations).
import { preferred } from "../../auth/accounts.ts";
import { builder } from "../builder.ts";

export const AccountStatus = builder.enumType("AccountStatus", {
  description: "Whether an account is in use. Webhook events carry the same word as `user.status`.",
  values: {
    active: { description: "the account is in use: every account linkgate creates is active" },
    disabled: { description: "marked disabled by an operator, outside the API (nothing in linkgate sets it)" },
  },
});

export const MergeRole = builder.enumType("MergeRole", {
  description: "An account's side of a merge: linking an identifier that another account signed up with merges the two.",
  values: {
    primary: { description: "another account was merged into this one: this one signs in and acts for both" },
    secondary: {
      description: "this account was merged into another (its primary): its identifiers and passkeys sign into the primary until they are unmerged",
    },
  },
});

type WithIdentifiers = { identifiers: Parameters<typeof preferred>[0] };

/** A field of the account's preferred identifier of a kind (what tokens and events carry), for `t.field(…)`. */
function preferredIdentifier<Type extends "EmailAddress" | "PhoneNumber">(type: Type, kind: "email" | "phone", description: string) {
  return { type, nullable: true, description, select: { identifiers: true }, resolve: (a: WithIdentifiers) => preferred(a.identifiers, kind)?.value ?? null } as const;
}

/** The options of each shared field, for `t.expose(name, …)` (`t.field(…)` for the computed ones). */
export const accountField = {
  name: { nullable: true, description: "The display name the user gave; null when never set or cleared." },
  email: preferredIdentifier("EmailAddress", "email", "The e-mail address tokens and events carry: the account's own, else its first attached; null when it has none."),
  phoneNumber: preferredIdentifier("PhoneNumber", "phone", "The phone number tokens carry: the account's own, else its first attached; null when it has none."),
  status: { type: AccountStatus, description: "Whether the account is in use." },
  createdAt: { type: "DateTime", description: "When the account was created (its first sign-in)." },
  updatedAt: { type: "DateTime", description: "When the account last changed." },
  lastLoginAt: { type: "DateTime", nullable: true, description: "Its last sign-in; null when it has none." },
  mergedAt: { type: "DateTime", nullable: true, description: "When the merge happened; null when not merged." },
} as const;
