// What the provider's storage needs to know about the request it serves: who is calling (for
// events) and which oidc-provider route is running (a grant revoked at the token endpoint is a
// replayed code or refresh token). Set by the mount for each request.
import { AsyncLocalStorage } from "node:async_hooks";
import type { Logger } from "../log.ts";

export type OidcRequest = {
  log: Logger;
  clientAddress: string;
  /** oidc-provider's context, set by a Koa middleware; its route is known once routed */
  /** the access token issued in this request, for the ID token's at_hash */
  accessToken?: string;
  koa?: { oidc?: { route?: string; params?: Record<string, unknown> } };
};

export const oidcRequest = new AsyncLocalStorage<OidcRequest>();
