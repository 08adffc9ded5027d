// The one error model. Every domain error is declared once, in ERRORS: its stable code (the
// name REST answers in `error` and GraphQL gives its error type), its HTTP status, its default
// message and what it means. Everything else derives from that table: the classes below, the
// REST status table (src/http/errors.ts), the OpenAPI responses (src/http/api-schemas.ts) and the
// GraphQL error types (src/graphql/schema/errors.ts). Adding an error is one entry here (and a
// class line, so code can throw it). Anything that is not a DomainError is unexpected and masked.

/**
 * How an error reaches a GraphQL client: as a typed member of the field's result union
 * ("result"), or as a top-level error with `extensions.code` (credentials, outages, limits on
 * fields without a union), or not at all (HTTP-only).
 */
type GraphQLShape = "result" | "top-level" | "none";

type Declaration = { status: number; message: string; meaning: string; graphql: GraphQLShape };

export const ERRORS = {
  IdentifierRequired: {
    status: 400,
    message: "exactly one of email or phone is required",
    meaning: "Neither `email` nor `phone` was given, or it was empty: exactly one is needed.",
    graphql: "result",
  },
  InvalidIdentifier: {
    status: 400,
    message: "that e-mail address or phone number is not valid",
    meaning: "The e-mail address or phone number (E.164, `+` and country code) is not valid.",
    graphql: "result",
  },
  InvalidRequest: {
    status: 400,
    message: "the request is malformed",
    meaning:
      "The request is malformed or out of bounds, and `message` says how: a REST body that is not a JSON object, has a field the route does not know or one of the wrong type, or holds a NUL character or an unpaired surrogate; both `email` and `phone`; a value out of bounds (a name too long, a page size or cursor out of range); or a conflict with a concurrent request (a secret rotated at the same moment).",
    graphql: "result",
  },
  OTPInvalid: {
    status: 400,
    message: "the code is wrong, expired or already used",
    meaning: "The code is wrong, expired or used up, or the state is unknown or was issued for another account, identifier or purpose.",
    graphql: "result",
  },
  PasskeyInvalid: {
    status: 400,
    message: "that passkey response is not valid: it may be malformed, forged, replayed, expired or from another site",
    meaning:
      "The passkey response is malformed, forged, replayed, expired, from another site, for an unknown challenge or of another account; when registering, also a passkey already registered.",
    graphql: "result",
  },
  InvalidWebhookUrl: {
    status: 400,
    message: "that webhook URL is not allowed",
    meaning: "The URL is not an absolute https:// URL of at most 2048 characters whose host resolves to public addresses only; `message` says why.",
    graphql: "result",
  },
  InvalidEventType: {
    status: 400,
    message: "unknown event type",
    meaning: "The list of event types is empty, or names a type that does not exist (see Query.eventTypes).",
    graphql: "result",
  },
  CursorExpired: {
    status: 400,
    message:
      "that cursor is older than the events' retention: events after it have been removed; pull again without a cursor to read from the oldest event kept",
    meaning:
      "The events pull reaches back as far as the events' retention (LINKGATE_RETENTION_EVENTS_DAYS, 30 days by default): events after this cursor have already been removed. Pull again without `after` to read from the oldest event kept, and reconcile anything older another way.",
    graphql: "result",
  },
  InvalidRedirectUri: {
    status: 400,
    message: "that redirect_uri is not registered for this project",
    meaning:
      "An external sign-in or link returns only to the hosted /login page or to an https redirect URI registered on one of the project's first-party OAuth clients, in development a loopback one too (docs/external-identities.md).",
    graphql: "result",
  },
  ExternalSignInFailed: {
    status: 400,
    message: "the sign-in at the other service did not succeed",
    meaning:
      "The identity provider refused the sign-in, or its answer failed a check (state, nonce, PKCE, signature, issuer, audience, expiry, a code already used); nothing was changed. Start again.",
    graphql: "result",
  },
  Unauthenticated: {
    status: 401,
    message: "missing or invalid credentials",
    meaning: "The API key or access token is missing, malformed, expired, revoked or forged, or the token's session has ended.",
    graphql: "top-level",
  },
  Forbidden: {
    status: 403,
    message: "these credentials may not do that",
    meaning: "The access token belongs to another project than the API key.",
    graphql: "top-level",
  },
  SecretKeyRequired: {
    status: 403,
    message: "this operation needs the project's secret key (lg_sk_…); a publishable key may only sign users in and act for a signed-in user",
    meaning: "A publishable key (lg_pk_…) was sent where the project's secret key (lg_sk_…) is needed.",
    graphql: "top-level",
  },
  InsufficientScope: {
    status: 403,
    message: "this access token was issued to a third-party app; it may read the claims the user granted at /oauth/userinfo, but never manage the account",
    meaning: "The access token was issued to a third-party OAuth app, which may read the claims the user granted but never manage the account (docs/oidc.md).",
    graphql: "top-level",
  },
  ReauthenticationRequired: {
    status: 403,
    message: "confirm it's you first: re-authenticate with a code sent to one of your addresses, or with a passkey",
    meaning:
      "The session's last sign-in or re-authentication is older than LINKGATE_RECENT_AUTH_SECONDS for this sensitive change: re-authenticate (by code or with a passkey), then try again.",
    graphql: "result",
  },
  NotFound: {
    status: 404,
    message: "not found",
    meaning: "No such object where the caller may see it: not the account's, or (for the admin operations) no such project or key.",
    graphql: "result",
  },
  WebhookNotFound: {
    status: 404,
    message: "no such webhook",
    meaning: "No webhook with that id in this project (another project's webhook is not found either).",
    graphql: "result",
  },
  ProviderNotFound: {
    status: 404,
    message: "no such identity provider",
    meaning: "No identity provider with that slug (or id) in this project.",
    graphql: "result",
  },
  DeliveryNotFound: { status: 404, message: "no such delivery", meaning: "No delivery with that id in this project.", graphql: "result" },
  CannotLinkSelf: {
    status: 409,
    message: "that identifier is already on your account",
    meaning: "The identifier is already on this account or on its merged secondary.",
    graphql: "result",
  },
  AlreadyLinked: {
    status: 409,
    message: "your account is already merged with another account; unmerge it first",
    meaning: "This account is already merged with another account: unmerge first.",
    graphql: "result",
  },
  TargetAlreadyLinked: {
    status: 409,
    message: "that identifier's account is already merged with another account",
    meaning: "The identifier belongs to an account that is already merged with another account.",
    graphql: "result",
  },
  TargetSecondaryIdentity: {
    status: 409,
    message: "that identifier is attached to another account; remove it there first",
    meaning: "The identifier is attached to another account (added there by linking): it must be removed there first.",
    graphql: "result",
  },
  NotMerged: {
    status: 409,
    message: "your account is not merged with another account",
    meaning: "This account is not merged with another account.",
    graphql: "result",
  },
  IdentifierNotLinked: {
    status: 409,
    message: "that identifier is not on your account",
    meaning: "The identifier is not on this account (nor, for removing, on its merged secondary).",
    graphql: "result",
  },
  LastIdentifier: {
    status: 409,
    message: "the last identifier of an account cannot be removed",
    meaning: "That is the account's last identifier: an account keeps at least one.",
    graphql: "result",
  },
  AccountMerged: {
    status: 409,
    message: "a merged account must be unmerged before it is deleted",
    meaning: "The account is merged with another: unmerge before deleting it.",
    graphql: "result",
  },
  PayloadTooLarge: { status: 413, message: "the request body is too large", meaning: "The body is larger than 64 KiB.", graphql: "none" },
  UnsupportedMediaType: {
    status: 415,
    message: "send the body as Content-Type: application/json",
    meaning: "A body was sent with another Content-Type than application/json.",
    graphql: "none",
  },
  RateLimited: {
    status: 429,
    message: "too many attempts; try again later",
    meaning:
      "Too many codes sent, wrong codes tried, or unauthenticated calls from one client address: wait `Retry-After` seconds (GraphQL: `retryAfterSeconds`), then try again.",
    graphql: "result",
  },
  UpstreamUnavailable: {
    status: 502,
    message: "the identity provider could not be reached in time; try again shortly",
    meaning: "The external identity provider did not answer within LINKGATE_UPSTREAM_TIMEOUT_MS, or its address is not allowed; nothing was changed.",
    graphql: "result",
  },
  ServiceUnavailable: {
    status: 503,
    message: "the service is temporarily unavailable; try again shortly",
    meaning: "The database cannot be reached, or a code could not be sent (the SMTP server or the SMS webhook failed); `Retry-After` says when to try again.",
    graphql: "top-level",
  },
} as const satisfies Record<string, Declaration>;

export type ErrorName = keyof typeof ERRORS;

export class DomainError extends Error {
  readonly code: ErrorName | "DomainError" = "DomainError";
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** The class of one declared error; its default message is the declaration's. */
function domain<C extends ErrorName>(code: C) {
  return class extends DomainError {
    /** the code, on the class itself: what an operation's list of errors names */
    static readonly code: C = code;
    override readonly code: C = code;
    constructor(message: string = ERRORS[code].message) {
      super(message);
      this.name = code;
    }
  };
}

export class IdentifierRequired extends domain("IdentifierRequired") {}
export class InvalidIdentifier extends domain("InvalidIdentifier") {}
export class InvalidRequest extends domain("InvalidRequest") {}
export class OTPInvalid extends domain("OTPInvalid") {}
export class NotFound extends domain("NotFound") {}
export class CannotLinkSelf extends domain("CannotLinkSelf") {}
export class AlreadyLinked extends domain("AlreadyLinked") {}
export class TargetAlreadyLinked extends domain("TargetAlreadyLinked") {}
export class TargetSecondaryIdentity extends domain("TargetSecondaryIdentity") {}
export class NotMerged extends domain("NotMerged") {}
export class IdentifierNotLinked extends domain("IdentifierNotLinked") {}
export class LastIdentifier extends domain("LastIdentifier") {}
export class WebhookNotFound extends domain("WebhookNotFound") {}
export class DeliveryNotFound extends domain("DeliveryNotFound") {}
export class InvalidWebhookUrl extends domain("InvalidWebhookUrl") {}
export class InvalidEventType extends domain("InvalidEventType") {}
/** An events-pull cursor with events after it already removed by retention: read from the start again. */
export class CursorExpired extends domain("CursorExpired") {}
export class PasskeyInvalid extends domain("PasskeyInvalid") {}
export class AccountMerged extends domain("AccountMerged") {}
export class ProviderNotFound extends domain("ProviderNotFound") {}
export class InvalidRedirectUri extends domain("InvalidRedirectUri") {}
/** The external identity provider refused, or its answer failed a check: nothing changed. */
export class ExternalSignInFailed extends domain("ExternalSignInFailed") {}
/** The external identity provider is down, too slow, or at an address that is not allowed. */
export class UpstreamUnavailable extends domain("UpstreamUnavailable") {}

export class RateLimited extends domain("RateLimited") {
  constructor(
    readonly retryAfterSeconds: number,
    message?: string,
  ) {
    super(message ?? `too many attempts; try again in ${retryAfterSeconds} s`);
  }
}

/** Credential failures: top-level UNAUTHENTICATED / FORBIDDEN in GraphQL, 401 / 403 in REST. */
export class Unauthenticated extends domain("Unauthenticated") {}
export class Forbidden extends domain("Forbidden") {}
/** A publishable key (lg_pk_…) on an operation only the project's secret key may do. */
export class SecretKeyRequired extends domain("SecretKeyRequired") {}
/**
 * A third-party OAuth app's access token on an operation that manages the account: such a token
 * reaches only the claims its scopes name (docs/oidc.md, "What a token reaches").
 */
export class InsufficientScope extends domain("InsufficientScope") {}
/** The database cannot be reached; the client should retry later. */
export class ServiceUnavailable extends domain("ServiceUnavailable") {
  constructor(readonly retryAfterSeconds = 5, message?: string) {
    super(message);
  }
}
/** A sensitive operation on a session whose last sign-in or re-authentication is too old. */
export class ReauthenticationRequired extends domain("ReauthenticationRequired") {}
export class PayloadTooLarge extends domain("PayloadTooLarge") {}
export class UnsupportedMediaType extends domain("UnsupportedMediaType") {}

/** What an operation taking `email` or `phone` refuses before anything else. */
export const IDENTIFIER_INPUT_ERRORS = [IdentifierRequired, InvalidIdentifier, InvalidRequest] as const;
