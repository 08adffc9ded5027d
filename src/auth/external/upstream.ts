// Talking to an external identity provider as a relying party, through openid-client: discovery,
// the authorization URL (PKCE S256, state, nonce), the code exchange and the ID token's checks
// (signature against the provider's JWKS, refetched when a new key appears; issuer, audience,
// nonce, expiry). GitHub is OAuth 2.0 plus its REST API (src/auth/external/presets.ts).
//
// Every request to a provider goes through the outbound guard of webhook targets: the host must
// resolve to public addresses only, and the connection goes to exactly the addresses vetted
// (docs/security.md, "Outbound requests"). Each request is bounded by LINKGATE_UPSTREAM_TIMEOUT_MS,
// so a provider that is slow or down costs a clear error, never a hung request.
import * as oidc from "openid-client";
import { Agent, fetch as undiciFetch } from "undici";
import type { Deps } from "../../deps.ts";
import { ExternalSignInFailed, UpstreamUnavailable } from "../../errors.ts";
import { assertSafeTarget, pinnedLookup, UnsafeWebhookTarget } from "../../webhooks/target-guard.ts";
import { githubEndpoints, PRESETS, type Preset } from "./presets.ts";

export type UpstreamProvider = {
  id: string;
  preset: Preset;
  issuer: string;
  clientId: string;
  /** unsealed, for this call only */
  clientSecret: string | null;
  scopes: string;
  updatedAt: Date;
};

/** What the provider proved: who (issuer, subject), and profile claims that decide nothing. */
export type UpstreamIdentity = { issuer: string; subject: string; email: string | null; emailVerified: boolean; name: string | null };

export type AuthorizationRequest = { redirectUri: string; state: string; nonce: string; codeVerifier: string };

/** Discovery answers kept per provider version for an hour; openid-client keeps the JWKS inside. */
const DISCOVERY_TTL_MS = 60 * 60 * 1000;
const configs = new Map<string, { version: number; at: number; config: oidc.Configuration }>();

type Guard = { allowPrivate: boolean; timeoutMs: number };
const guardOf = (deps: Deps): Guard => ({ allowPrivate: deps.config.webhookAllowPrivate, timeoutMs: deps.config.upstreamTimeoutMs });

/** fetch for openid-client: the outbound guard, a connection only to the vetted addresses, a deadline. */
function guardedFetch(guard: Guard) {
  return async (url: string, options: oidc.CustomFetchOptions): Promise<Response> => {
    let vetted;
    try {
      vetted = await assertSafeTarget(url, { allowPrivate: guard.allowPrivate });
    } catch (err) {
      if (err instanceof UnsafeWebhookTarget) throw new UpstreamUnavailable(`the identity provider's address is not allowed: ${err.message}`);
      throw err;
    }
    const host = new URL(url).hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase();
    const dispatcher = new Agent({ connect: { timeout: guard.timeoutMs, lookup: pinnedLookup(new Map([[host, vetted]])) as never } });
    const signal = AbortSignal.any([options.signal ?? new AbortController().signal, AbortSignal.timeout(guard.timeoutMs)]);
    try {
      const res = await undiciFetch(url, { ...(options as object), signal, dispatcher, redirect: "manual" } as never);
      // the body is read by the caller; the agent closes once idle
      void dispatcher.close();
      return res as unknown as Response;
    } catch (err) {
      void dispatcher.destroy();
      throw err;
    }
  };
}

function clientAuth(p: UpstreamProvider) {
  return p.clientSecret ? oidc.ClientSecretPost(p.clientSecret) : oidc.None();
}

function insecureAllowed(p: UpstreamProvider, guard: Guard): boolean {
  // plain http only where private addresses are allowed (local development and tests)
  return guard.allowPrivate && p.issuer.startsWith("http://");
}

async function discover(p: UpstreamProvider, guard: Guard): Promise<oidc.Configuration> {
  const fetchFn = guardedFetch(guard);
  const execute = insecureAllowed(p, guard) ? [oidc.allowInsecureRequests] : [];
  if (p.preset === "github") {
    const e = githubEndpoints(p.issuer);
    const config = new oidc.Configuration({ issuer: p.issuer, authorization_endpoint: e.authorization, token_endpoint: e.token }, p.clientId, undefined, clientAuth(p));
    for (const f of execute) f(config);
    config[oidc.customFetch] = fetchFn;
    config.timeout = Math.ceil(guard.timeoutMs / 1000);
    return config;
  }
  const config = await oidc.discovery(new URL(p.issuer), p.clientId, undefined, clientAuth(p), {
    execute,
    timeout: Math.ceil(guard.timeoutMs / 1000),
    [oidc.customFetch]: fetchFn,
  });
  config[oidc.customFetch] = fetchFn;
  return config;
}

async function configFor(p: UpstreamProvider, guard: Guard): Promise<oidc.Configuration> {
  const version = p.updatedAt.getTime();
  const hit = configs.get(p.id);
  if (hit && hit.version === version && Date.now() - hit.at < DISCOVERY_TTL_MS) return hit.config;
  const config = await upstreamCall(() => discover(p, guard));
  configs.set(p.id, { version, at: Date.now(), config });
  return config;
}

/** The URL to send the user's browser to. */
export async function authorizationUrl(deps: Deps, p: UpstreamProvider, req: AuthorizationRequest): Promise<string> {
  const config = await configFor(p, guardOf(deps));
  const params: Record<string, string> = {
    redirect_uri: req.redirectUri,
    scope: p.scopes,
    state: req.state,
    code_challenge: await oidc.calculatePKCECodeChallenge(req.codeVerifier),
    code_challenge_method: "S256",
  };
  if (p.preset !== "github") params.nonce = req.nonce;
  const mode = PRESETS[p.preset].responseMode;
  if (mode) params.response_mode = mode;
  return oidc.buildAuthorizationUrl(config, params).href;
}

/**
 * The code exchange of a callback: `response` holds what the provider sent back (query or form
 * fields). Throws ExternalSignInFailed for anything forged, replayed or refused, and
 * UpstreamUnavailable when the provider cannot be reached in time.
 */
export async function exchangeCode(deps: Deps, p: UpstreamProvider, req: AuthorizationRequest, response: URLSearchParams): Promise<UpstreamIdentity> {
  const guard = guardOf(deps);
  const config = await configFor(p, guard);
  const current = new URL(req.redirectUri);
  for (const [k, v] of response) current.searchParams.append(k, v);
  const tokens = await upstreamCall(() =>
    oidc.authorizationCodeGrant(config, current, {
      pkceCodeVerifier: req.codeVerifier,
      expectedState: req.state,
      ...(p.preset === "github" ? { idTokenExpected: false } : { expectedNonce: req.nonce, idTokenExpected: true }),
    }),
  );
  if (p.preset === "github") return githubIdentity(p, tokens.access_token, guard);
  const claims = tokens.claims();
  if (!claims) throw new ExternalSignInFailed("the identity provider sent no ID token");
  return {
    issuer: claims.iss,
    subject: claims.sub,
    email: typeof claims.email === "string" ? claims.email.toLowerCase() : null,
    // some providers (Apple) send the boolean as a string
    emailVerified: claims.email_verified === true || claims.email_verified === "true",
    name: typeof claims.name === "string" ? claims.name.slice(0, 200) : null,
  };
}

type GithubUser = { id?: unknown; name?: unknown; login?: unknown; email?: unknown };
type GithubEmail = { email?: unknown; primary?: unknown; verified?: unknown };

async function githubIdentity(p: UpstreamProvider, accessToken: string, guard: Guard): Promise<UpstreamIdentity> {
  const e = githubEndpoints(p.issuer);
  const get = async <T>(url: string): Promise<T> => {
    const res = await upstreamCall(() =>
      guardedFetch(guard)(url, {
        method: "GET",
        headers: { authorization: `Bearer ${accessToken}`, accept: "application/vnd.github+json", "user-agent": "linkgate" },
        redirect: "manual",
        body: undefined,
      } as unknown as oidc.CustomFetchOptions),
    );
    if (res.status >= 500) throw new UpstreamUnavailable(`GitHub's API answered ${res.status}`);
    if (res.status !== 200) throw new ExternalSignInFailed(`GitHub's API answered ${res.status}`);
    return (await res.json()) as T;
  };
  const user = await get<GithubUser>(e.user);
  if (typeof user.id !== "number" && typeof user.id !== "string") throw new ExternalSignInFailed("GitHub sent no user id");
  // The primary address only when GitHub says it is verified; the profile's address is public
  // text. Without this answer the sign-in stops: going on without it would make a second account
  // for someone whose verified address an account holds.
  const emails = await get<GithubEmail[]>(e.emails);
  const primary = Array.isArray(emails) ? emails.find((m) => m.primary === true && m.verified === true && typeof m.email === "string") : undefined;
  const email = primary ? String(primary.email) : typeof user.email === "string" ? user.email : null;
  const name = typeof user.name === "string" ? user.name : typeof user.login === "string" ? user.login : null;
  return { issuer: p.issuer.replace(/\/+$/, ""), subject: String(user.id), email: email?.toLowerCase() ?? null, emailVerified: !!primary, name: name?.slice(0, 200) ?? null };
}

const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ENOTFOUND", "ETIMEDOUT", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT", "UND_ERR_SOCKET", "EHOSTUNREACH"]);

/** Whether an error, or any error it wraps, is the provider being unreachable or too slow. */
function unreachable(err: unknown): boolean {
  for (let e = err as { name?: string; code?: string; cause?: unknown } | undefined, depth = 0; e && depth < 6; e = e.cause as typeof e, depth++) {
    if (e.name === "AbortError" || e.name === "TimeoutError") return true;
    if (e.code && NETWORK_CODES.has(e.code)) return true;
    if (e.name === "TypeError" && /fetch failed/.test(String((e as Error).message))) return true;
    if (e instanceof UpstreamUnavailable) return true;
  }
  return false;
}

/** Runs a request to the provider, answering in linkgate's terms whatever goes wrong. */
async function upstreamCall<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof UpstreamUnavailable || err instanceof ExternalSignInFailed) throw err;
    if (unreachable(err)) throw new UpstreamUnavailable();
    const why = (err as Error)?.message ?? "refused";
    throw new ExternalSignInFailed(`the identity provider's answer was refused: ${why.slice(0, 200)}`);
  }
}

/** Forget a provider's discovery (after it changed or was deleted). */
export function forgetProvider(id: string): void {
  configs.delete(id);
}
