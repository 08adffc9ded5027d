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
import { Agent, fetch as undiciFetch, Response as UndiciResponse } from "undici";
import type { Deps } from "../../deps.ts";
import { ExternalSignInFailed, UpstreamUnavailable } from "../../errors.ts";
import { charLength, isDisguising, isStorableText, nameText, unshowable } from "../../text.ts";
import { normalizeEmail } from "../identifiers.ts";
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

/**
 * Per provider (and version): its discovered metadata, kept an hour, and its key set as last
 * fetched. Each request builds its openid-client Configuration from them (see configure).
 */
type Discovered = { version: number; at: number; metadata: oidc.ServerMetadata; keys?: oidc.ExportedJWKSCache };
const DISCOVERY_TTL_MS = 60 * 60 * 1000;
const discovered = new Map<string, Discovered>();

// What is kept is bounded (30th review): a project's secret key can add providers, each of
// whose answers may be up to UPSTREAM_BODY_LIMIT, and every process kept every provider's whole
// discovery document (unknown fields included) and key set forever: 260 KB a provider.
/** Providers whose discovery a process keeps; the one used longest ago is dropped first. */
const DISCOVERED_MAX = 500;
/** The most of a provider's metadata, or of its key set, kept between requests. Real ones are a few KiB. */
const KEPT_MAX_CHARS = 32 * 1024;
/** The metadata this gateway's flows use: the rest of a discovery document is not kept. */
const METADATA_KEPT = [
  "issuer", "authorization_endpoint", "token_endpoint", "jwks_uri", "userinfo_endpoint", "end_session_endpoint",
  "response_types_supported", "response_modes_supported", "grant_types_supported", "scopes_supported", "claims_supported",
  "subject_types_supported", "token_endpoint_auth_methods_supported", "token_endpoint_auth_signing_alg_values_supported",
  "code_challenge_methods_supported", "id_token_signing_alg_values_supported", "authorization_response_iss_parameter_supported",
  "pushed_authorization_request_endpoint", "require_pushed_authorization_requests", "mtls_endpoint_aliases",
] as const;

function keptMetadata(metadata: oidc.ServerMetadata): oidc.ServerMetadata {
  const kept = Object.fromEntries(METADATA_KEPT.filter((k) => metadata[k] !== undefined).map((k) => [k, metadata[k]])) as oidc.ServerMetadata;
  if (JSON.stringify(kept).length > KEPT_MAX_CHARS) {
    throw new UpstreamUnavailable(`the identity provider's discovery document names more than ${KEPT_MAX_CHARS / 1024} KiB of metadata`);
  }
  return kept;
}

function remember(providerId: string, entry: Discovered): void {
  discovered.delete(providerId);
  discovered.set(providerId, entry);
  while (discovered.size > DISCOVERED_MAX) discovered.delete(discovered.keys().next().value!);
}

type Guard = { allowPrivate: boolean; timeoutMs: number };
const guardOf = (deps: Deps): Guard => ({ allowPrivate: deps.config.webhookAllowPrivate, timeoutMs: deps.config.upstreamTimeoutMs });

/** fetch for openid-client: the outbound guard, a connection only to the vetted addresses, a deadline. */
function guardedFetch(guard: Guard) {
  return async (url: string, options: oidc.CustomFetchOptions): Promise<Response> => {
    let vetted;
    try {
      vetted = await assertSafeTarget(url, { allowPrivate: guard.allowPrivate, signal: AbortSignal.timeout(guard.timeoutMs) });
    } catch (err) {
      if (err instanceof UnsafeWebhookTarget) throw new UpstreamUnavailable(`the identity provider's address is not allowed: ${err.message}`);
      throw err;
    }
    const host = new URL(url).hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase();
    const dispatcher = new Agent({ connect: { timeout: guard.timeoutMs, lookup: pinnedLookup(new Map([[host, vetted]])) as never } });
    const signal = AbortSignal.any([options.signal ?? new AbortController().signal, AbortSignal.timeout(guard.timeoutMs)]);
    try {
      const res = await undiciFetch(url, { ...(options as object), signal, dispatcher, redirect: "manual" } as never);
      const body = await boundedBody(res);
      void dispatcher.close();
      return new UndiciResponse(body, { status: res.status, statusText: res.statusText, headers: res.headers }) as unknown as Response;
    } catch (err) {
      void dispatcher.destroy();
      throw err;
    }
  };
}

/**
 * The most of an identity provider's answer that is read. Discovery documents, key sets, token
 * answers and GitHub's user API are a few KiB; the provider is whatever address a project's
 * secret key configured, and an answer read whole, however large, would let one project's
 * provider fill the memory every project's sign-ins share.
 */
export const UPSTREAM_BODY_LIMIT = 256 * 1024;

const NULL_BODY_STATUSES = new Set([101, 204, 205, 304]);

async function boundedBody(res: Awaited<ReturnType<typeof undiciFetch>>): Promise<Uint8Array | null> {
  if (NULL_BODY_STATUSES.has(res.status) || !res.body) return null;
  const tooLarge = () => new UpstreamUnavailable(`the identity provider answered with more than ${UPSTREAM_BODY_LIMIT} bytes`);
  if (Number(res.headers.get("content-length") ?? 0) > UPSTREAM_BODY_LIMIT) {
    await res.body.cancel().catch(() => {});
    throw tooLarge();
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += chunk.byteLength;
    if (size > UPSTREAM_BODY_LIMIT) throw tooLarge(); // leaving the loop cancels the body
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function clientAuth(p: UpstreamProvider) {
  return p.clientSecret ? oidc.ClientSecretPost(p.clientSecret) : oidc.None();
}

function insecureAllowed(p: UpstreamProvider, guard: Guard): boolean {
  // plain http only where private addresses are allowed (local development and tests)
  return guard.allowPrivate && p.issuer.startsWith("http://");
}

/**
 * An issuer that is a discovery document's URL (anything under /.well-known/): openid-client
 * fetches it as it is and takes whatever issuer the document names, unchecked, so such a
 * provider could name another provider's issuer (Google's) and sign its users' ID tokens with
 * keys of its own, signing into their accounts (docs/external-identities.md, "Providers").
 */
export const isDiscoveryUrl = (issuer: string) => /\/\.well-known\//i.test(new URL(issuer).href);

async function discoverMetadata(p: UpstreamProvider, guard: Guard): Promise<oidc.ServerMetadata> {
  // one stored before providers.ts refused such an issuer
  if (isDiscoveryUrl(p.issuer)) throw new ExternalSignInFailed("the provider's issuer is a discovery document's URL, not an issuer: give the issuer itself");
  if (p.preset === "github") {
    const e = githubEndpoints(p.issuer);
    return { issuer: p.issuer, authorization_endpoint: e.authorization, token_endpoint: e.token };
  }
  const execute = insecureAllowed(p, guard) ? [oidc.allowInsecureRequests] : [];
  const config = await oidc.discovery(new URL(p.issuer), p.clientId, undefined, clientAuth(p), {
    execute,
    timeout: Math.ceil(guard.timeoutMs / 1000),
    [oidc.customFetch]: guardedFetch(guard),
  });
  return config.serverMetadata();
}

async function discoveredFor(p: UpstreamProvider, guard: Guard): Promise<Discovered> {
  const version = p.updatedAt.getTime();
  const hit = discovered.get(p.id);
  if (hit && hit.version === version && Date.now() - hit.at < DISCOVERY_TTL_MS) {
    remember(p.id, hit);
    return hit;
  }
  const entry = { version, at: Date.now(), metadata: keptMetadata(await upstreamCall(() => discoverMetadata(p, guard))) };
  remember(p.id, entry);
  return entry;
}

/** The key set's age, in seconds, below which openid-client will not fetch it again for a key it lacks. */
const REFETCH_AFTER_S = 60;

/**
 * A Configuration for one request. ID tokens' signatures are checked against the provider's
 * key set: openid-client would trust an ID token from the token endpoint without (TLS is enough
 * for OpenID Connect Core §3.1.3.7), but then a token endpoint that was impersonated could name
 * any user. The cached key set is handed over as if at least a minute old, so an ID token signed
 * by a key it lacks (a rotation not announced in advance) fetches the set again at once instead
 * of failing for a minute. An ID token's key comes from the provider's token endpoint, so nobody
 * else can make linkgate fetch more often.
 */
function configure(p: UpstreamProvider, guard: Guard, entry: Discovered): { config: oidc.Configuration; keepKeys: () => void } {
  const config = new oidc.Configuration(entry.metadata, p.clientId, undefined, clientAuth(p));
  if (insecureAllowed(p, guard)) oidc.allowInsecureRequests(config);
  config[oidc.customFetch] = guardedFetch(guard);
  config.timeout = Math.ceil(guard.timeoutMs / 1000);
  if (p.preset === "github") return { config, keepKeys: () => {} };
  oidc.enableNonRepudiationChecks(config);
  const handed = entry.keys && Math.min(entry.keys.uat, Math.floor(Date.now() / 1000) - REFETCH_AFTER_S);
  if (entry.keys && handed) oidc.setJwksCache(config, { ...entry.keys, uat: handed });
  const keepKeys = () => {
    const now = oidc.getJwksCache(config);
    // fetched during this request: the set and when (a set too large to keep is fetched again when needed)
    if (now && (!handed || now.uat > handed) && JSON.stringify(now.jwks).length <= KEPT_MAX_CHARS) entry.keys = now;
  };
  return { config, keepKeys };
}

/** The URL to send the user's browser to. */
export async function authorizationUrl(deps: Deps, p: UpstreamProvider, req: AuthorizationRequest): Promise<string> {
  const guard = guardOf(deps);
  const { config } = configure(p, guard, await discoveredFor(p, guard));
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
  // a discovery naming an authorization endpoint that is not https (or http on loopback) is refused here
  return upstreamCall(async () => oidc.buildAuthorizationUrl(config, params).href);
}

/**
 * The code exchange of a callback: `response` holds what the provider sent back (query or form
 * fields). Throws ExternalSignInFailed for anything forged, replayed or refused, and
 * UpstreamUnavailable when the provider cannot be reached in time.
 */
export async function exchangeCode(deps: Deps, p: UpstreamProvider, req: AuthorizationRequest, response: URLSearchParams): Promise<UpstreamIdentity> {
  const guard = guardOf(deps);
  const entry = await discoveredFor(p, guard);
  const { config, keepKeys } = configure(p, guard, entry);
  const current = new URL(req.redirectUri);
  for (const [k, v] of response) current.searchParams.append(k, v);
  const tokens = await upstreamCall(
    () =>
      oidc.authorizationCodeGrant(config, current, {
      pkceCodeVerifier: req.codeVerifier,
      expectedState: req.state,
        ...(p.preset === "github" ? { idTokenExpected: false } : { expectedNonce: req.nonce, idTokenExpected: true }),
      }),
    keepKeys,
  );
  keepKeys();
  if (p.preset === "github") return storable(await githubIdentity(p, tokens.access_token, guard));
  const claims = tokens.claims();
  if (!claims) throw new ExternalSignInFailed("the identity provider sent no ID token");
  return storable({
    issuer: claims.iss,
    subject: claims.sub,
    email: typeof claims.email === "string" ? claims.email : null,
    // some providers (Apple) send the boolean as a string
    emailVerified: claims.email_verified === true || claims.email_verified === "true",
    name: typeof claims.name === "string" ? claims.name : p.preset === "apple" ? appleName(response.get("user")) : null,
  });
}

/**
 * What is stored of an identity must be text Postgres takes (a NUL in a provider's answer was a
 * 500 at the callback, and the flow stayed unfinished: tenth review). The user id decides who
 * signs in, so a bad one refuses the sign-in; a bad or overlong e-mail or name, profile claims,
 * is dropped (and an e-mail dropped is not verified).
 */
function storable(identity: UpstreamIdentity): UpstreamIdentity {
  // counted in characters as people count them (src/text.ts): cut at 200 UTF-16 units first, a
  // name of 150 emoji lost a third of itself, and one cut inside an emoji was dropped whole
  const ok = (s: string | null, max: number): s is string => s !== null && isStorableText(s) && charLength(s) <= max;
  if (!identity.subject || !ok(identity.subject, 255) || !ok(identity.issuer, 2048)) {
    throw new ExternalSignInFailed("the identity provider sent a user id that is not usable text");
  }
  // profile claims are shown to others (the account's name on the dashboard and to every app, the
  // claims on the account page): one that would garble or disguise what is around it is dropped
  // too, and a name that shows nothing (src/text.ts), judged as it is spelled once stored (an
  // address's line end is trimmed)
  const shown = (s: string | null): s is string => s !== null && !isDisguising(s.trim());
  const claimed = ok(identity.email, 320) ? claimedEmail(identity.email) : null;
  const email = shown(claimed) ? claimed : null;
  // a name is stored as a name typed here is (src/text.ts, nameText): in NFC, without surrounding white space
  const name = identity.name !== null && isStorableText(identity.name) ? nameText(identity.name) || null : null;
  return { ...identity, email, emailVerified: email !== null && identity.emailVerified, name: ok(name, 200) && unshowable(name) === null ? name : null };
}

/**
 * An e-mail claim spelled as linkgate stores addresses (normalizeEmail: trimmed, lower case, a
 * Unicode domain as its punycode), so that a verified claim of an address an account holds is
 * found as that account's, whatever the provider's spelling: compared as sent, " ada@example.com"
 * and "ada@bücher.example" (held as ada@xn--bcher-kva.example) made a second account without the
 * code to the address (docs/external-identities.md, "Signing in"). A claim that is no address
 * stays profile text, and matches nothing.
 */
function claimedEmail(claim: string): string {
  try {
    return normalizeEmail(claim);
  } catch {
    return claim.toLowerCase();
  }
}

/**
 * Apple's ID token carries no name: Apple posts it once, on the user's first authorization of
 * the app, as a JSON form field beside the code ({"name":{"firstName","lastName"},"email"}). The
 * field is not signed, so only the name is read, as the profile claim a name always is here (it
 * decides nothing); its e-mail is ignored, the ID token's is the one checked.
 */
function appleName(field: string | null): string | null {
  if (!field || field.length > 2_000) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(field);
  } catch {
    return null;
  }
  const name = (parsed as { name?: { firstName?: unknown; lastName?: unknown } } | null)?.name;
  const parts = [name?.firstName, name?.lastName].filter((x): x is string => typeof x === "string" && x.trim() !== "").map((x) => x.trim());
  return parts.length ? parts.join(" ") : null;
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
    // a body that is not JSON is a refused answer (upstreamCall), not a 500
    return upstreamCall(() => res.json() as Promise<T>);
  };
  const user = await get<GithubUser | null>(e.user);
  if (typeof user !== "object" || user === null || (typeof user.id !== "number" && typeof user.id !== "string")) {
    throw new ExternalSignInFailed("GitHub sent no user id");
  }
  // The primary address only when GitHub says it is verified; the profile's address is public
  // text. Without this answer the sign-in stops: going on without it would make a second account
  // for someone whose verified address an account holds.
  const emails = await get<GithubEmail[]>(e.emails);
  const primary = Array.isArray(emails) ? emails.find((m) => m?.primary === true && m.verified === true && typeof m.email === "string") : undefined;
  const email = primary ? String(primary.email) : typeof user.email === "string" ? user.email : null;
  const name = typeof user.name === "string" ? user.name : typeof user.login === "string" ? user.login : null;
  return { issuer: p.issuer.replace(/\/+$/, ""), subject: String(user.id), email, emailVerified: !!primary, name };
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
async function upstreamCall<T>(fn: () => Promise<T>, onError?: () => void): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    onError?.();
    if (err instanceof UpstreamUnavailable || err instanceof ExternalSignInFailed) throw err;
    // openid-client wraps what guardedFetch threw (an answer too large) in errors of its own
    const ours = wrapped(err, UpstreamUnavailable);
    if (ours) throw ours;
    if (unreachable(err)) throw new UpstreamUnavailable();
    const why = (err as Error)?.message ?? "refused";
    throw new ExternalSignInFailed(`the identity provider's answer was refused: ${why.slice(0, 200)}`);
  }
}

function wrapped<E extends Error>(err: unknown, kind: new (...args: never[]) => E): E | undefined {
  for (let e = err as { cause?: unknown } | undefined, depth = 0; e && depth < 6; e = e.cause as typeof e, depth++) {
    if (e instanceof kind) return e;
  }
  return undefined;
}

/** Forget a provider's discovery (after it changed or was deleted). */
export function forgetProvider(id: string): void {
  discovered.delete(id);
}
