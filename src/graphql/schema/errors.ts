// Domain errors as typed results: every error class of src/errors.ts becomes an object type
// of the same name implementing `interface Error { message: String! }`.
import * as E from "../../errors.ts";
import { builder } from "../builder.ts";

export const ErrorInterface = builder.interfaceRef<Error>("Error").implement({
  fields: (t) => ({ message: t.exposeString("message") }),
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
] as const;

for (const cls of simple) {
  builder.objectType(cls, { name: new cls().code, interfaces: [ErrorInterface], isTypeOf: (v) => v instanceof cls, fields: () => ({}) });
}

builder.objectType(E.RateLimited, {
  name: "RateLimited",
  interfaces: [ErrorInterface],
  isTypeOf: (v) => v instanceof E.RateLimited,
  fields: (t) => ({ retryAfterSeconds: t.exposeInt("retryAfterSeconds") }),
});

/** The error types a field may return, listed where the field is defined. */
export const identifierErrors = [E.IdentifierRequired, E.InvalidIdentifier, E.InvalidRequest, E.RateLimited];
