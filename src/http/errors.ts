// The one table from error codes to HTTP statuses (CONTRACT section 3). A database that cannot
// be reached is 503 ServiceUnavailable with Retry-After, so clients retry instead of reporting
// a bug. Anything else that is not a DomainError is unexpected: logged with the request id and
// answered with a masked 500.
import type { Context } from "hono";
import { isConnectionFailure } from "../db/faults.ts";
import { DomainError, RateLimited, ServiceUnavailable } from "../errors.ts";

export const STATUS: Record<string, number> = {
  IdentifierRequired: 400,
  InvalidIdentifier: 400,
  InvalidRequest: 400,
  OTPInvalid: 400,
  InvalidWebhookUrl: 400,
  InvalidEventType: 400,
  CursorExpired: 400,
  Unauthenticated: 401,
  Forbidden: 403,
  SecretKeyRequired: 403,
  ReauthenticationRequired: 403,
  InsufficientScope: 403,
  PasskeyInvalid: 400,
  NotFound: 404,
  WebhookNotFound: 404,
  DeliveryNotFound: 404,
  CannotLinkSelf: 409,
  AlreadyLinked: 409,
  TargetAlreadyLinked: 409,
  TargetSecondaryIdentity: 409,
  NotMerged: 409,
  IdentifierNotLinked: 409,
  LastIdentifier: 409,
  AccountMerged: 409,
  PayloadTooLarge: 413,
  UnsupportedMediaType: 415,
  RateLimited: 429,
  ServiceUnavailable: 503,
};

export function errorBody(error: string, message: string) {
  return { error, message };
}

export function errorResponse(c: Context, err: unknown): Response {
  if (!(err instanceof DomainError) && isConnectionFailure(err)) {
    c.get("log")?.warn({ err }, "database unreachable");
    err = new ServiceUnavailable();
  }
  if (err instanceof DomainError) {
    const headers: Record<string, string> = {};
    if (err instanceof RateLimited || err instanceof ServiceUnavailable) headers["Retry-After"] = String(err.retryAfterSeconds);
    if (err.code === "Unauthenticated") headers["WWW-Authenticate"] = 'Bearer realm="linkgate"';
    return c.json(errorBody(err.code, err.message), (STATUS[err.code] ?? 400) as 400, headers);
  }
  c.get("log")?.error({ err }, "unexpected error");
  return c.json(errorBody("InternalError", "something went wrong on our side; the request id is in X-Request-Id"), 500);
}
