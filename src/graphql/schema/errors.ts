// Domain errors as typed results: every error class of src/errors.ts becomes an object type
// of the same name implementing `interface Error { message: String! }`.
import * as E from "../../errors.ts";
import { builder } from "../builder.ts";

export const ErrorInterface = builder.interfaceRef<Error>("Error").implement({
  description:
    "A domain error: the request was understood and refused, and nothing changed. Each implementing type names one reason, the same name as the REST API's `error`.",
  fields: (t) => ({ message: t.exposeString("message", { description: "What went wrong, in words for people; it may change, so branch on `__typename`." }) }),
});

const simple = [
  E.IdentifierRequired,
  E.InvalidIdentifier,
  E.InvalidRequest,
  E.OTPInvalid,
  E.NotFound,
  E.CannotLinkSelf,
  E.AlreadyLinked,
  E.TargetAlreadyLinked,
  E.TargetSecondaryIdentity,
  E.NotMerged,
  E.IdentifierNotLinked,
  E.LastIdentifier,
  E.WebhookNotFound,
  E.DeliveryNotFound,
  E.InvalidWebhookUrl,
  E.InvalidEventType,
  E.AccountMerged,
  E.PasskeyInvalid,
  E.ReauthenticationRequired,
  E.CursorExpired,
] as const;

const MEANING: Record<InstanceType<(typeof simple)[number]>["code"], string> = {
  IdentifierRequired: "Neither `email` nor `phone` was given, or it was empty: exactly one is needed.",
  InvalidIdentifier: "The e-mail address or phone number is not valid.",
  InvalidRequest:
    "A value is out of bounds or the request conflicts with a concurrent one; `message` says which (a name too long, both `email` and `phone`, a page size or cursor out of range, a secret rotated at the same moment…).",
  OTPInvalid: "The code is wrong, expired or already used, or the stateId is unknown or was issued for another purpose or account.",
  NotFound: "No such object where the caller may see it: not the account's, or (for the admin mutations) no such project or key.",
  CannotLinkSelf: "The identifier is already on this account or on its merged secondary.",
  AlreadyLinked: "This account is already merged with another account: unmerge first.",
  TargetAlreadyLinked: "The identifier belongs to an account that is already merged with another account.",
  TargetSecondaryIdentity: "The identifier is attached to another account (added there by linking): it must be removed there first.",
  NotMerged: "This account is not merged with another account.",
  IdentifierNotLinked: "The identifier is not on this account (nor, for removeLink, on its merged secondary).",
  LastIdentifier: "That is the account's last identifier: an account keeps at least one.",
  WebhookNotFound: "No webhook with that id in this project (another project's webhook is not found either).",
  DeliveryNotFound: "No delivery with that id in this project.",
  InvalidWebhookUrl:
    "The URL is not an absolute https:// URL of at most 2048 characters whose host resolves to public addresses only; `message` says why.",
  InvalidEventType: "The list of event types is empty, or names a type that does not exist (see Query.eventTypes).",
  AccountMerged: "The account is merged with another: unmerge before deleting it.",
  PasskeyInvalid:
    "The passkey response is malformed, forged, replayed, expired, from another site, for an unknown challenge or of another account; when registering, also a passkey already registered.",
  CursorExpired:
    "The events pull reaches back as far as the events' retention (LINKGATE_RETENTION_EVENTS_DAYS, 30 days by default): events after this cursor have already been removed. Pull again without `after` to read from the oldest event kept, and reconcile anything older another way.",
  ReauthenticationRequired:
    "The session's last sign-in or re-authentication is too old for this sensitive change: re-authenticate (startReauthentication or reauthenticateWithPasskey), then try again.",
};

for (const cls of simple) {
  const code = new cls().code;
  builder.objectType(cls, { name: code, description: MEANING[code], interfaces: [ErrorInterface], isTypeOf: (v) => v instanceof cls, fields: () => ({}) });
}

builder.objectType(E.RateLimited, {
  name: "RateLimited",
  description: "Too many codes sent, or too many wrong codes tried: wait, then try again.",
  interfaces: [ErrorInterface],
  isTypeOf: (v) => v instanceof E.RateLimited,
  fields: (t) => ({ retryAfterSeconds: t.exposeInt("retryAfterSeconds", { description: "How many seconds to wait before trying again." }) }),
});

/** The error types a field may return, listed where the field is defined. */
export const identifierErrors = [E.IdentifierRequired, E.InvalidIdentifier, E.InvalidRequest, E.RateLimited];

/** The options of a field's result union: what it is, for the union's description. */
export function resultOf(success: string) {
  return { description: `${success} when it worked; otherwise the domain error that refused it (each other member implements Error).` };
}
