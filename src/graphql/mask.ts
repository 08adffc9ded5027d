// How unexpected errors leave GraphQL: masked, except faults the client should know about.
// A database that cannot be reached is not a bug to hide but a reason to retry: a top-level
// SERVICE_UNAVAILABLE error, HTTP 503 with Retry-After, like the REST routes answer.
import type { GraphQLError } from "graphql";
import { createGraphQLError, maskError as yogaMaskError, type YogaServerOptions } from "graphql-yoga";
import { isConnectionFailure } from "../db/faults.ts";
import { RateLimited, ServiceUnavailable } from "../errors.ts";

type MaskError = NonNullable<Exclude<YogaServerOptions<object, object>["maskedErrors"], boolean | undefined>["maskError"]>;

export const maskError: MaskError = (error, message, isDev) => {
  const original = (error as { originalError?: unknown } | undefined)?.originalError;
  if (original instanceof ServiceUnavailable) return serviceUnavailable(error, original);
  if (isConnectionFailure(error)) return serviceUnavailable(error, new ServiceUnavailable());
  // an abuse limit on a field without an error union (startPasskeySignIn returns JSON): the
  // refusal the REST route gives, not an "Unexpected error"
  if (original instanceof RateLimited) return rateLimited(error, original);
  return yogaMaskError(error, message, isDev);
};

// Keeps where the error happened (path, locations), as yoga's own masking does.
function serviceUnavailable(error: unknown, unavailable: ServiceUnavailable) {
  const { nodes, source, positions, path } = error as Partial<GraphQLError>;
  return createGraphQLError(unavailable.message, {
    nodes,
    source,
    positions,
    path,
    extensions: {
      code: "SERVICE_UNAVAILABLE",
      http: { status: 503, headers: { "Retry-After": String(unavailable.retryAfterSeconds) } },
    },
  });
}

function rateLimited(error: unknown, limited: RateLimited) {
  const { nodes, source, positions, path } = error as Partial<GraphQLError>;
  return createGraphQLError(limited.message, {
    nodes,
    source,
    positions,
    path,
    extensions: {
      code: "RATE_LIMITED",
      error: "RateLimited",
      retryAfterSeconds: limited.retryAfterSeconds,
      http: { status: 429, headers: { "Retry-After": String(limited.retryAfterSeconds) } },
    },
  });
}
