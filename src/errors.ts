// The one error model. A DomainError has a stable code (the contract's error name) and a
// human message; GraphQL turns each class into a typed result, and src/http/errors.ts maps
// codes to HTTP statuses at the REST edge. Anything else is unexpected and gets masked.

export class DomainError extends Error {
  readonly code: string = "DomainError";
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

function domain<C extends string>(code: C, fallback: string) {
  return class extends DomainError {
    override readonly code: C = code;
    constructor(message: string = fallback) {
      super(message);
      this.name = code;
    }
  };
}

export class IdentifierRequired extends domain("IdentifierRequired", "exactly one of email or phone is required") {}
export class InvalidIdentifier extends domain("InvalidIdentifier", "that e-mail address or phone number is not valid") {}
export class InvalidRequest extends domain("InvalidRequest", "the request is malformed") {}
export class OTPInvalid extends domain("OTPInvalid", "the code is wrong, expired or already used") {}
export class NotFound extends domain("NotFound", "not found") {}
export class CannotLinkSelf extends domain("CannotLinkSelf", "that identifier is already on your account") {}
export class AlreadyLinked extends domain("AlreadyLinked", "your account is already merged with another account; unmerge it first") {}
export class TargetAlreadyLinked extends domain("TargetAlreadyLinked", "that identifier's account is already merged with another account") {}
export class TargetSecondaryIdentity extends domain("TargetSecondaryIdentity", "that identifier is attached to another account; remove it there first") {}
export class NotMerged extends domain("NotMerged", "your account is not merged with another account") {}
export class IdentifierNotLinked extends domain("IdentifierNotLinked", "that identifier is not on your account") {}
export class LastIdentifier extends domain("LastIdentifier", "the last identifier of an account cannot be removed") {}
export class WebhookNotFound extends domain("WebhookNotFound", "no such webhook") {}
export class DeliveryNotFound extends domain("DeliveryNotFound", "no such delivery") {}
export class InvalidWebhookUrl extends domain("InvalidWebhookUrl", "that webhook URL is not allowed") {}
export class InvalidEventType extends domain("InvalidEventType", "unknown event type") {}
/** An events-pull cursor with events after it already removed by retention: read from the start again. */
export class CursorExpired extends domain(
  "CursorExpired",
  "that cursor is older than the events' retention: events after it have been removed; pull again without a cursor to read from the oldest event kept",
) {}
export class PasskeyInvalid extends domain(
  "PasskeyInvalid",
  "that passkey response is not valid: it may be malformed, forged, replayed, expired or from another site",
) {}
export class AccountMerged extends domain("AccountMerged", "a merged account must be unmerged before it is deleted") {}

export class RateLimited extends domain("RateLimited", "too many attempts; try again later") {
  constructor(readonly retryAfterSeconds: number, message?: string) {
    super(message ?? `too many attempts; try again in ${retryAfterSeconds} s`);
  }
}

/** Credential failures: top-level UNAUTHENTICATED / FORBIDDEN in GraphQL, 401 / 403 in REST. */
export class Unauthenticated extends domain("Unauthenticated", "missing or invalid credentials") {}
export class Forbidden extends domain("Forbidden", "these credentials may not do that") {}
/** A publishable key (lg_pk_…) on an operation only the project's secret key may do. */
export class SecretKeyRequired extends domain(
  "SecretKeyRequired",
  "this operation needs the project's secret key (lg_sk_…); a publishable key may only sign users in and act for a signed-in user",
) {}
/**
 * A third-party OAuth app's access token on an operation that manages the account: such a token
 * reaches only the claims its scopes name (docs/oidc.md, "What a token reaches").
 */
export class InsufficientScope extends domain(
  "InsufficientScope",
  "this access token was issued to a third-party app; it may read the claims the user granted at /oauth/userinfo, but never manage the account",
) {}
/** The database cannot be reached; the client should retry later. */
export class ServiceUnavailable extends domain("ServiceUnavailable", "the service is temporarily unavailable; try again shortly") {
  constructor(readonly retryAfterSeconds = 5, message?: string) {
    super(message);
  }
}
/** A sensitive operation on a session whose last sign-in or re-authentication is too old. */
export class ReauthenticationRequired extends domain(
  "ReauthenticationRequired",
  "confirm it's you first: re-authenticate with a code sent to one of your addresses, or with a passkey",
) {}
export class PayloadTooLarge extends domain("PayloadTooLarge", "the request body is too large") {}
