// How unexpected errors leave GraphQL: masked, except faults the client should know about.
// A database that cannot be reached is not a bug to hide but a reason to retry: a top-level
// SERVICE_UNAVAILABLE error, HTTP 503 with Retry-After, like the REST routes answer.
import { PothosValidationError } from "@pothos/core";
import type { GraphQLError } from "graphql";
import { createGraphQLError, maskError as yogaMaskError, type YogaServerOptions } from "graphql-yoga";
import { isConnectionFailure } from "../db/faults.ts";
import { Forbidden, InvalidRequest, RateLimited, ServiceUnavailable, Unauthenticated } from "../errors.ts";
import { credentialError } from "./context.ts";

type MaskError = NonNullable<Exclude<YogaServerOptions<object, object>["maskedErrors"], boolean | undefined>["maskError"]>;

export const maskError: MaskError = (error, message) => {
  const original = (error as { originalError?: unknown } | undefined)?.originalError;
  if (original instanceof ServiceUnavailable) return serviceUnavailable(error, original);
  if (isConnectionFailure(error)) return serviceUnavailable(error, new ServiceUnavailable());
  // an abuse limit on a field without an error union (startPasskeySignIn returns JSON): the
  // refusal the REST route gives, not an "Unexpected error"
  if (original instanceof RateLimited) return rateLimited(error, original);
  // a session that ended, or an account that went, while the request ran (a merge, removal or
  // deletion committed on another gateway): the credential error it would have had a moment
  // earlier, as REST answers it, not "Unexpected error" (24th review)
  if (original instanceof Unauthenticated || original instanceof Forbidden) {
    const e = credentialError(original) as GraphQLError;
    return replaced(error, e.message, { ...e.extensions });
  }
  // a bound a service checks on a field without an error union (recentEvents' `first`): the
  // BAD_USER_INPUT a page size out of range gets everywhere else (src/graphql/pages.ts)
  if (original instanceof InvalidRequest) return replaced(error, original.message, { code: "BAD_USER_INPUT" });
  // Pothos's own argument checks (a negative `first` or `last`, before src/graphql/pages.ts
  // sees them): shown as they are, they carried no code
  if (original instanceof PothosValidationError) return replaced(error, original.message, { code: "BAD_USER_INPUT" });
  // Never yoga's development mode (`isDev`, true whenever NODE_ENV is `development`), which
  // answered the fault's message and stack (extensions.originalError) to any caller: unexpected
  // errors are logged and answered masked (docs/security.md, "Logs"), as REST answers them.
  return yogaMaskError(error, message, false);
};

/**
 * Whether maskError answers `error` as a refusal of the client's own request (an abuse limit, its
 * credentials, its input) rather than a fault. yoga logs every error maskError replaces at error
 * level with its stack: a negative `first`, or the 61st startPasskeySignIn of a client address, wrote
 * one such line per request, as many as any signed-in user cared to send. REST logs the same
 * refusals in the request's line only; these are logged at debug (src/graphql/yoga.ts).
 */
export function isClientRefusal(error: unknown): boolean {
  const original = (error as { originalError?: unknown } | undefined)?.originalError;
  return (
    original instanceof RateLimited ||
    original instanceof Unauthenticated ||
    original instanceof Forbidden ||
    original instanceof InvalidRequest ||
    original instanceof PothosValidationError
  );
}

/** A top-level error in place of `error`, keeping where it happened (path, locations) as yoga's own masking does. */
function replaced(error: unknown, message: string, extensions: Record<string, unknown>) {
  const { nodes, source, positions, path } = error as Partial<GraphQLError>;
  return createGraphQLError(message, { nodes, source, positions, path, extensions });
}

function serviceUnavailable(error: unknown, unavailable: ServiceUnavailable) {
  return replaced(error, unavailable.message, {
    code: "SERVICE_UNAVAILABLE",
    http: { status: 503, headers: { "Retry-After": String(unavailable.retryAfterSeconds) } },
  });
}

function rateLimited(error: unknown, limited: RateLimited) {
  return replaced(error, limited.message, {
    code: "RATE_LIMITED",
    error: "RateLimited",
    retryAfterSeconds: limited.retryAfterSeconds,
    http: { status: 429, headers: { "Retry-After": String(limited.retryAfterSeconds) } },
  });
}
