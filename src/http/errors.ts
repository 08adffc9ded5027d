// Errors at the REST edge: each answers its declared status (src/errors.ts). A database that cannot
// be reached is 503 ServiceUnavailable with Retry-After, so clients retry instead of reporting
// a bug. Anything else that is not a DomainError is unexpected: logged with the request id and
// answered with a masked 500.
import type { Context, MiddlewareHandler } from "hono";
import { isConnectionFailure } from "../db/faults.ts";
import { DomainError, ERRORS, RateLimited, ServiceUnavailable, type ErrorName } from "../errors.ts";

/** An error's HTTP status, from its one declaration (src/errors.ts); 400 for a code nobody declared. */
export function statusOf(code: string): number {
  return Object.hasOwn(ERRORS, code) ? ERRORS[code as ErrorName].status : 400;
}

/**
 * The error shape. `error` is a declared name (src/errors.ts; "DomainError" only for the bare
 * base class), or InternalError, the masked 500 of anything unexpected.
 */
export function errorBody(error: DomainError["code"] | "InternalError", message: string) {
  return { error, message };
}

/** The masked 500 of anything unexpected: its details are in the log, under the request id. */
export const maskedFault = () => errorBody("InternalError", "something went wrong on our side; the request id is in X-Request-Id");

/** 404 NotFound in the error shape: unknown routes, and the static-file routes' missing files. */
export function notFound(c: Context, message: string): Response {
  return c.json(errorBody("NotFound", message), ERRORS.NotFound.status);
}

/**
 * A HEAD where a GET does something: Hono answers a HEAD through the GET route, and oidc-provider
 * through its GET routes, so a link scanner's or a browser's prefetch sending HEAD ran them. At an
 * external provider's callback that exchanged the code and used up the flow, and the user's own
 * GET then got the expired page; at the authorization endpoint it stored an interaction, without
 * being counted. Refused with 405 and the methods the route takes, before anything is read or
 * written (docs/rest.md, "Conventions").
 */
export function refuseHead(allow: string): MiddlewareHandler {
  return async (c, next) => {
    if (c.req.raw.method !== "HEAD") return next();
    return c.body(null, 405, { Allow: allow, "Cache-Control": "no-store" });
  };
}

/**
 * The rest of a body over the limit is never read: the connection cannot carry another request,
 * so the client is told not to reuse it (else its next request there hangs up). For every answer
 * to a refused body, in whatever shape its route answers.
 */
export function connectionHeaders(err: DomainError): Record<string, string> {
  return err.code === "PayloadTooLarge" ? { Connection: "close" } : {};
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
    return c.json(errorBody(err.code, err.message), statusOf(err.code) as 400, { ...headers, ...connectionHeaders(err) });
  }
  c.get("log")?.error({ err }, "unexpected error");
  return c.json(maskedFault(), 500);
}
