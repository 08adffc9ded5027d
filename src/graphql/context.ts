// Per-request GraphQL context: credentials are resolved lazily and once, by the same
// functions REST uses; failures become top-level UNAUTHENTICATED / FORBIDDEN errors.
// Built with yoga's own helper so the error is an instance of the GraphQLError class yoga
// checks when deciding what to mask, whichever copy of graphql the caller loaded.
import { createGraphQLError } from "graphql-yoga";
import { authenticateProject, authenticateUser, bearerToken, isAdmin } from "../auth/authenticate.ts";
import { requireSecretKey, type Deps, type KeyActor, type UserActor } from "../deps.ts";
import { Forbidden, InsufficientScope, SecretKeyRequired, Unauthenticated } from "../errors.ts";

export type GraphQLContext = {
  deps: Deps;
  /** the project, with the key the request came with (apiKeyId: who acted) */
  project(): Promise<KeyActor>;
  /** the project, called with its secret key (webhooks, deliveries, events) */
  secret(): Promise<KeyActor>;
  user(): Promise<UserActor>;
  admin: boolean;
  /** Forgets the credentials read so far: the next call reads them again (each root mutation field, schema/index.ts). */
  afresh(): void;
};

/** What the HTTP layer hands yoga besides the request. */
export type ServerContext = { clientAddress: string };

export function credentialError(err: unknown): unknown {
  // refusals that say which rule refused, so a client can tell the user what to do
  if (err instanceof SecretKeyRequired || err instanceof InsufficientScope) {
    return createGraphQLError(err.message, { extensions: { code: "FORBIDDEN", error: err.code } });
  }
  if (err instanceof Forbidden) return createGraphQLError(err.message, { extensions: { code: "FORBIDDEN" } });
  if (err instanceof Unauthenticated) return createGraphQLError(err.message, { extensions: { code: "UNAUTHENTICATED" } });
  return err;
}

function once<T>(fn: () => Promise<T>): () => Promise<T> {
  let p: Promise<T> | undefined;
  return () => (p ??= fn().catch((err) => Promise.reject(credentialError(err))));
}

export function createContext(deps: Deps, request: Request, server: ServerContext): GraphQLContext {
  const apiKey = request.headers.get("x-api-key");
  const bearer = bearerToken(request.headers.get("authorization"));
  const { clientAddress } = server;
  const userAgent = request.headers.get("user-agent");
  const read = () => {
    const project = once(() => authenticateProject(deps, { apiKey, clientAddress, userAgent }));
    return {
      project,
      secret: once(async () => requireSecretKey(await project())),
      user: once(() => authenticateUser(deps, { apiKey, bearer, clientAddress, userAgent })),
    };
  };
  let credentials = read();
  return {
    deps,
    project: () => credentials.project(),
    secret: () => credentials.secret(),
    user: () => credentials.user(),
    admin: isAdmin(deps, request.headers.get("x-admin-token")),
    afresh: () => (credentials = read()),
  };
}
