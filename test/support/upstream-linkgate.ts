// External sign-in and linking (docs/rest.md, issue 27) driven the way an app and its user's
// browser drive them: the app calls linkgate's REST routes with its API key, the browser follows
// the upstream's redirects (the fixture's followAuthorization) and then lands on linkgate's
// callback, which sends it back to the app with a one-time code.
import { startHarness, type Harness } from "./app.ts";
import type { Backend } from "./db.ts";
import { standIn, startedForBlock } from "./hooks.ts";
import { ORIGIN, registerClient, type RegisteredClient } from "./oidc.ts";
import { startUpstreamGithub, startUpstreamOidc, type UpstreamGithub, type UpstreamOidc } from "./upstream.ts";

export type Upstream = UpstreamOidc | UpstreamGithub;
export type Res = { status: number; body: any; headers: Headers };
type From = { from?: string };

const CREATE = `mutation($input: IdentityProviderInput!) { createIdentityProvider(input: $input) {
  __typename ... on IdentityProvider { id slug callbackUrl } ... on Error { message } } }`;

/**
 * A client address of its own for each flow: start and callback are bounded per address
 * (EXTERNAL_FLOWS_PER_ADDRESS), and requests through app.fetch would otherwise all count as one.
 * security.external-callbacks.test.ts checks the bound itself.
 */
let addresses = 0;
export const freshAddress = () => {
  const n = ++addresses;
  return `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
};

/** Registers an upstream with the project (secret key, GraphQL) and the callback with the upstream. */
export async function addProvider(h: Harness, up: Upstream, slug: string, opts: { displayName?: string; preset?: "APPLE" } = {}): Promise<{ id: string; callbackUrl: string }> {
  const github = "baseUrl" in up;
  const input = {
    preset: opts.preset ?? (github ? "GITHUB" : "OIDC"),
    slug,
    displayName: opts.displayName ?? slug,
    issuer: github ? up.baseUrl : up.issuer,
    clientId: up.clientId,
    clientSecret: up.clientSecret,
    // a preset's own scopes unless the test's upstream needs others
    ...(opts.preset ? {} : { scopes: github ? ["read:user", "user:email"] : ["openid", "email", "profile"] }),
  };
  const res = await h.gql(CREATE, { input });
  const out = res.body.data?.createIdentityProvider;
  if (!out?.callbackUrl) throw new Error(`createIdentityProvider: ${JSON.stringify(res.body)}`);
  up.addRedirectUri(out.callbackUrl);
  return { id: out.id, callbackUrl: out.callbackUrl };
}

export type ExternalWorld = { h: Harness; google: UpstreamOidc; github: UpstreamGithub; app: RegisteredClient; close(): Promise<void> };

/**
 * linkgate on `backend`, an upstream acting as Google and one imitating GitHub, both registered
 * as the project's providers "google" and "github", and a first-party app redirecting to `redirectUri`.
 */
export async function startExternalWorld(backend: Backend, redirectUri: string): Promise<ExternalWorld> {
  const h = await startHarness(backend, { env: { LINKGATE_ISSUER: ORIGIN } });
  const [google, github] = await Promise.all([startUpstreamOidc(), startUpstreamGithub()]);
  const app = await registerClient(h, { firstParty: true, redirectUris: [redirectUri] });
  await addProvider(h, google, "google", { displayName: "Google" });
  await addProvider(h, github, "github", { displayName: "GitHub" });
  return {
    h, google, github, app,
    async close() {
      await h.close();
      await google.stop();
      await github.stop();
    },
  };
}

/** startExternalWorld for the calling describe block's tests, closed after them. */
export function externalWorldFor(backend: Backend, redirectUri: string): Omit<ExternalWorld, "close"> {
  const world = startedForBlock(() => startExternalWorld(backend, redirectUri), (started) => started.close());
  return { h: standIn(() => world().h), google: standIn(() => world().google), github: standIn(() => world().github), app: standIn(() => world().app) };
}

/** The identifier value linkgate gives an upstream user: <issuer>#<subject>. */
export const externalValue = (up: Upstream, subject: string | number) => `${"baseUrl" in up ? up.baseUrl : up.issuer}#${subject}`;

/** What the browser gets from linkgate's callback: the response itself, not followed. */
export async function callback(h: Harness, url: URL, opts: From = {}): Promise<Response> {
  return h.app.fetch(new Request(url.toString()), { incoming: { socket: { remoteAddress: opts.from ?? freshAddress() } } });
}

/** Where the callback sent the browser, and the one-time code (or error) it carries. */
export function landing(res: Response): { url: URL; code: string | null; error: string | null } {
  const location = res.headers.get("location");
  if (res.status !== 303 || !location) throw new Error(`callback answered ${res.status}, not a redirect to the app`);
  const url = new URL(location);
  return { url, code: url.searchParams.get("code"), error: url.searchParams.get("error") };
}

export type Started = { state_id: string; authorization_url: string };

/** POST /auth/external/start (or /users/link/external/start with a user's token). */
export async function start(h: Harness, provider: string, redirectUri: string, opts: From & { token?: string } = {}): Promise<Res> {
  const route = opts.token ? "/users/link/external/start" : "/auth/external/start";
  return h.call("POST", route, { body: { provider, redirect_uri: redirectUri }, from: opts.from ?? freshAddress(), headers: opts.token ? { authorization: `Bearer ${opts.token}` } : {} });
}

/** Start, the upstream's sign-in, the callback: the app's one-time code for this state. */
export async function authorize(h: Harness, up: Upstream, provider: string, redirectUri: string, opts: From & { token?: string } = {}): Promise<{ started: Started; code: string }> {
  opts = { ...opts, from: opts.from ?? freshAddress() };
  const s = await start(h, provider, redirectUri, opts);
  if (s.status !== 200) throw new Error(`start: ${s.status} ${JSON.stringify(s.body)}`);
  const back = landing(await callback(h, await up.followAuthorization(s.body.authorization_url), opts));
  if (!back.code) throw new Error(`callback sent the browser back with ${back.url.search}`);
  return { started: s.body, code: back.code };
}

export const complete = (h: Harness, stateId: string, code: string, opts: From = {}) =>
  h.call("POST", "/auth/external/complete", { body: { state_id: stateId, code }, from: opts.from });

/** POST /auth/external/confirm: the code sent to the e-mail of a verification_required answer. */
export const confirm = (h: Harness, stateId: string, otp: string) => h.call("POST", "/auth/external/confirm", { body: { state_id: stateId, otp }, from: freshAddress() });

export const verifyLink = (h: Harness, token: string, stateId: string, code: string) =>
  h.call("POST", "/users/link/external/verify", { body: { state_id: stateId, code }, headers: { authorization: `Bearer ${token}` } });

/** A whole external sign-in as the upstream's current user: what /auth/external/complete answers. */
export async function externalSignIn(h: Harness, up: Upstream, provider: string, redirectUri: string, opts: From = {}): Promise<Res> {
  const { started, code } = await authorize(h, up, provider, redirectUri, opts);
  return complete(h, started.state_id, code, opts);
}

/** A whole link of the upstream's current user to the signed-in account: what verify answers. */
export async function externalLink(h: Harness, up: Upstream, provider: string, redirectUri: string, token: string): Promise<Res> {
  const { started, code } = await authorize(h, up, provider, redirectUri, { token });
  return verifyLink(h, token, started.state_id, code);
}

/**
 * Every account and identifier, the external identities' claims, live sessions and user events:
 * what a refused or failed request must leave as it was.
 */
export async function snapshot(h: Harness) {
  const p = h.db.prisma;
  return {
    accounts: await p.account.findMany({ orderBy: { id: "asc" } }),
    identifiers: await p.identifier.findMany({ orderBy: { id: "asc" } }),
    externalIdentities: await p.externalIdentity.findMany({ orderBy: { identifierId: "asc" } }),
    liveSessions: await p.session.findMany({ where: { endedAt: null }, orderBy: { id: "asc" }, select: { id: true } }),
    userEvents: await p.outboxEvent.count({ where: { eventType: { startsWith: "user." } } }),
  };
}
