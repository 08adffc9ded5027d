// linkgate as an OpenID Connect provider (docs/oidc.md), built on oidc-provider (OpenID
// Certified). This file is its whole configuration: what it issues and how each RFC rule is set.
// The protocol itself (PKCE, code and refresh-token handling, error codes) is the library's.
//
// oidc-provider 9 prints "Unsupported runtime" on Node 20 because it only checks the LTS codename;
// it uses no API newer than Node 20 (checked by grep and by test/oidc.*.test.ts running it here).
import { publicPath } from "../config.ts";
import type Provider from "oidc-provider";
import type { Client, Configuration, KoaContextWithOIDC } from "oidc-provider";

type Ctx = KoaContextWithOIDC;
import type { Deps } from "../deps.ts";
import { deriveKey } from "../crypto.ts";
import { loadAccount, oidcClaims, SCOPE_CLAIMS } from "../auth/accounts.ts";
import { ACCESS_TOKEN_TTL_SECONDS, signingJwks } from "../auth/tokens.ts";
import { adapterFor, sessionOfGrant } from "./adapter.ts";
import { EXTRA_METADATA, projectOf } from "./client-metadata.ts";
import { secretMatches } from "./clients.ts";
import { causeOf, errorPage, logoutPage, signedOutPage } from "./pages.ts";
import { oidcRequest } from "./request-context.ts";

export const SCOPES = ["openid", "email", "phone", "profile", "offline_access"] as const;

/** The resource indicator of a project's API: access tokens for it have `aud` = the project id. */
export const resourceFor = (projectId: string) => `urn:linkgate:project:${projectId}`;

const DAY = 24 * 3600;
export const TTL = {
  AuthorizationCode: 60,
  AccessToken: ACCESS_TOKEN_TTL_SECONDS,
  IdToken: ACCESS_TOKEN_TTL_SECONDS,
  RefreshToken: 30 * DAY,
  Grant: 30 * DAY,
  Session: 30 * DAY,
  Interaction: 15 * 60,
};

export const ROUTES = {
  authorization: "/oauth/authorize",
  token: "/oauth/token",
  revocation: "/oauth/revoke",
  end_session: "/oauth/logout",
  // served by linkgate itself (src/http/routes/auth.ts); these paths are never forwarded
  jwks: "/.well-known/jwks.json",
  userinfo: "/oauth/userinfo",
};

const RESPONSE_TYPES = ["code"];
const GRANT_TYPES = ["authorization_code", "refresh_token"];
const CLIENT_AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post"];
const SIGNING_ALG = "ES256";

/** The discovery document (/.well-known/openid-configuration) of what this file configures. */
export function discoveryDocument(issuer: string) {
  return {
    issuer,
    authorization_endpoint: `${issuer}${ROUTES.authorization}`,
    token_endpoint: `${issuer}${ROUTES.token}`,
    revocation_endpoint: `${issuer}${ROUTES.revocation}`,
    end_session_endpoint: `${issuer}${ROUTES.end_session}`,
    jwks_uri: `${issuer}${ROUTES.jwks}`,
    userinfo_endpoint: `${issuer}${ROUTES.userinfo}`,
    response_types_supported: RESPONSE_TYPES,
    response_modes_supported: ["query"],
    grant_types_supported: GRANT_TYPES,
    // the one method oidc-provider implements; configuration() makes PKCE required
    code_challenge_methods_supported: ["S256"],
    token_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
    revocation_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
    // oidc-provider adds `iss` to every authorization response (RFC 9207)
    authorization_response_iss_parameter_supported: true,
    claims_parameter_supported: false,
    subject_types_supported: ["public"],
    id_token_signing_alg_values_supported: [SIGNING_ALG],
    scopes_supported: [...SCOPES],
    // the scopes' claims, then the ones every ID token or access token may carry
    claims_supported: [...Object.values(SCOPE_CLAIMS).flat(), "sid", "auth_time", "amr", "nonce"],
  };
}

const providers = new WeakMap<Deps, Promise<Provider>>();

/** One provider per app, made on first use (it needs the signing keys from the database). */
export function providerFor(deps: Deps): Promise<Provider> {
  let p = providers.get(deps);
  if (!p) {
    p = createProvider(deps);
    providers.set(deps, p);
  }
  return p;
}

type OidcModule = typeof import("oidc-provider");
let oidc: OidcModule | undefined;

/**
 * Loads oidc-provider on the first OpenID Connect request, without its import-time warning about
 * Node 20 (above): printed on stderr, it was a second, non-JSON line beside the logs, and broke
 * the one-line message of a start that fails. Loading late also keeps processes that never serve
 * the flow (the worker, the CLI) from loading Koa at all.
 */
async function loadOidcProvider(): Promise<OidcModule> {
  if (oidc) return oidc;
  const warn = console.warn;
  console.warn = (...args: unknown[]) => {
    if (!String(args[0]).startsWith("oidc-provider WARNING: Unsupported runtime")) warn(...args);
  };
  try {
    oidc = await import("oidc-provider");
  } finally {
    console.warn = warn;
  }
  return oidc;
}

async function createProvider(deps: Deps): Promise<Provider> {
  const { default: Provider } = await loadOidcProvider();
  const provider = new Provider(deps.keys.issuer, { ...(await configuration(deps)), interactions: interactions(await loadOidcProvider(), publicPath(deps.keys.issuer)) });
  provider.proxy = deps.config.trustedProxies.length > 0;
  // Secrets are kept hashed, so the presented one is hashed and compared in constant time.
  provider.Client.prototype.compareClientSecret = function (this: { clientSecret?: string }, actual: string) {
    return secretMatches(this.clientSecret, actual);
  };
  addAtHash(provider);
  provider.use(offlineAccessAsksConsent);
  provider.use(async (ctx, next) => {
    const req = oidcRequest.getStore();
    if (req) req.koa = ctx as KoaContextWithOIDC;
    await next();
  });
  provider.on("server_error", (_ctx, err) => oidcRequest.getStore()?.log.error({ err }, "OpenID Connect provider error"));
  return provider;
}

/**
 * The ID token from the token endpoint carries `at_hash` of the access token issued with it
 * (docs/oidc.md); oidc-provider adds it only at the authorization endpoint. The access
 * token's value is noted as it is saved and the ID token issued next in the same request hashes
 * it (the library computes the hash of whatever `at_hash` holds).
 */
function addAtHash(provider: Provider) {
  const AccessToken = (provider as unknown as { AccessToken: { prototype: { save(): Promise<string> } } }).AccessToken;
  const IdToken = (provider as unknown as { IdToken: { prototype: { issue(o: { use: string }): Promise<string>; set(k: string, v: unknown): void } } }).IdToken;
  const save = AccessToken.prototype.save;
  AccessToken.prototype.save = async function (this: unknown) {
    const value = await save.call(this);
    const req = oidcRequest.getStore();
    if (req) req.accessToken = value;
    return value;
  };
  const issue = IdToken.prototype.issue;
  IdToken.prototype.issue = function (this: { set(k: string, v: unknown): void }, opts: { use: string }) {
    const accessToken = oidcRequest.getStore()?.accessToken;
    if (opts?.use === "idtoken" && accessToken) this.set("at_hash", accessToken);
    return issue.call(this, opts);
  };
}

/**
 * OpenID Connect issues a refresh token for `offline_access` only when consent was asked
 * (Core 11); every authorization with it asks, and first-party clients and remembered answers
 * are answered by linkgate without showing a page.
 */
async function offlineAccessAsksConsent(ctx: { path: string; method: string; query: Record<string, unknown> }, next: () => Promise<unknown>) {
  if (ctx.path === ROUTES.authorization && ctx.method === "GET") {
    const { scope, prompt } = ctx.query;
    if (typeof scope === "string" && scope.split(" ").includes("offline_access")) {
      const prompts = typeof prompt === "string" ? prompt.split(" ").filter(Boolean) : [];
      if (!prompts.includes("consent") && !prompts.includes("none")) ctx.query = { ...ctx.query, prompt: [...prompts, "consent"].join(" ") };
    }
  }
  await next();
}

/** The protocol features linkgate turns on or off, and how each is set (docs/oidc.md). */
function features(): Configuration["features"] {
  return {
    devInteractions: { enabled: false },
    // Tokens are bearer tokens (docs/oidc.md, "Tokens"): the API and userinfo take them as
    // `Authorization: Bearer` and check no DPoP proof. On (oidc-provider's default), a client that
    // sent a DPoP proof got `token_type: DPoP` and a `cnf.jkt` it believed bound the token to its
    // key, while anyone holding the token could use it as a bearer token. Off, the DPoP header
    // is ignored and the answer says Bearer (RFC 9449 section 5), as discovery lists no DPoP.
    dPoP: { enabled: false },
    userinfo: { enabled: false },
    introspection: { enabled: false },
    // RFC 7009: a client revokes only its own tokens; another's is answered 200 and left alone
    revocation: { enabled: true, allowedPolicy: (_ctx: Ctx, client: Client, token: { clientId?: string }) => token.clientId === client.clientId },
    rpInitiatedLogout: {
      enabled: true,
      logoutSource: (ctx: Ctx, form: string) => {
        ctx.type = "html";
        ctx.body = logoutPage(form);
      },
      postLogoutSuccessSource: (ctx: Ctx) => {
        ctx.type = "html";
        ctx.body = signedOutPage();
      },
    },
    resourceIndicators: {
      enabled: true,
      defaultResource: (_ctx: Ctx, client: Client) => resourceFor(projectOf(client)),
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx: Ctx, resource: string, client: Client) => {
        const projectId = projectOf(client);
        if (resource !== resourceFor(projectId)) throw new oidc!.errors.InvalidTarget("this client's tokens are for its own project only");
        return {
          scope: SCOPES.join(" "),
          audience: projectId,
          accessTokenFormat: "jwt",
          accessTokenTTL: TTL.AccessToken,
          jwt: { sign: { alg: SIGNING_ALG } },
        };
      },
    },
  };
}

/**
 * oidc-provider's interaction policy with one more reason to sign in: a browser's session that
 * names an account this app's project does not hold (another project's, one deleted or merged
 * away since). findAccount finds nothing for it, and the consent checks then read a grant that
 * was never loaded: every authorization in that browser failed with a 500 for as long as the
 * session cookie lived (30 days). Now the user is asked to sign in again.
 */
function interactions(mod: OidcModule, prefix: string) {
  const { base, Check } = mod.interactionPolicy;
  const policy = base();
  const gone = (ctx: Ctx) => (ctx.oidc.session.accountId && !ctx.oidc.account ? Check.REQUEST_PROMPT : Check.NO_NEED_TO_PROMPT);
  policy.get("login").checks.add(new Check("account_not_found", "the signed-in account is not one of this project's", "login_required", gone), 0);
  // the browser's way there, and the interaction cookie's path: under the issuer's path behind a
  // proxy that strips it, or the cookie is never sent back (docs/operations.md, "Behind a reverse proxy")
  return { policy, url: (_ctx: Ctx, interaction: { uid: string }) => `${prefix}/oauth/interaction/${interaction.uid}` };
}

async function configuration(deps: Deps): Promise<Configuration> {
  return {
    adapter: adapterFor(deps),
    jwks: { keys: (await signingJwks(deps.prisma, deps.master)) as never },
    cookies: {
      keys: [deriveKey(deps.master, "oidc-cookies").toString("base64url")],
      names: { session: "lg_oidc_session", interaction: "lg_oidc_interaction", resume: "lg_oidc_resume" },
    },
    claims: {
      ...SCOPE_CLAIMS,
      // amr: how the session signed in (otp or passkey), from the interaction's result
      openid: [...SCOPE_CLAIMS.openid, "amr"],
    },
    scopes: [...SCOPES],
    responseTypes: RESPONSE_TYPES,
    pkce: { required: () => true },
    clientAuthMethods: CLIENT_AUTH_METHODS,
    clientDefaults: { id_token_signed_response_alg: SIGNING_ALG, grant_types: GRANT_TYPES, response_types: RESPONSE_TYPES },
    enabledJWA: { idTokenSigningAlgValues: [SIGNING_ALG] },
    extraClientMetadata: { properties: EXTRA_METADATA },
    // A browser may call the token and revocation endpoints only for a public client, from the
    // origin of one of its redirect URIs (docs/oidc.md, "CORS"); preflights and answers given
    // before the client is known are decided in src/http/routes/oauth.ts.
    clientBasedCORS: (_ctx: Ctx, origin: string, client: Client & { clientAuthMethod?: string; redirectUris?: string[] }) =>
      origin !== "null" && client.clientAuthMethod === "none" && (client.redirectUris ?? []).some((uri) => URL.canParse(uri) && new URL(uri).origin === origin),
    features: features(),
    findAccount: async (ctx: Ctx, sub: string) => {
      const client = ctx.oidc.client;
      if (!client) return undefined;
      const account = await loadAccount(deps.prisma, projectOf(client), sub);
      // a merged secondary never acts; its sign-ins land on the primary
      if (!account || account.mergeRole === "secondary") return undefined;
      return { accountId: sub, claims: () => ({ ...oidcClaims(account), name: account.name ?? undefined }) };
    },
    // Every access token carries the linkgate session it was given in: each API call checks it.
    extraTokenClaims: async (_ctx: Ctx, token: { kind: string; grantId?: string }) => {
      if (token.kind !== "AccessToken" || !token.grantId) return undefined;
      const sid = await sessionOfGrant(deps, token.grantId);
      return sid ? { sid } : undefined;
    },
    expiresWithSession: () => true,
    rotateRefreshToken: true,
    revokeGrantPolicy: () => true,
    ttl: TTL,
    routes: ROUTES,
    renderError: (ctx: Ctx, out: { error: string; error_description?: string }, err: unknown) => {
      oidcRequest.getStore()?.log.info({ error: out.error, description: out.error_description, err: (err as Error)?.message }, "OpenID Connect request refused");
      ctx.type = "html";
      ctx.body = errorPage(out.error, out.error_description, causeOf(err, out.error));
    },
  };
}
