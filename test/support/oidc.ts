// Helpers for the OpenID Connect tests: registering clients over GraphQL, and a user agent that
// runs an authorization through app.fetch with its own cookies, signing in by code the way the
// hosted /login page does (its interaction endpoints); and the harness a describe block of such
// tests runs against (oidcHarness).
import * as client from "openid-client";
import type { Harness } from "./app.ts";
import type { Backend } from "./db.ts";
import { harnessFor, standIn, startedForBlock } from "./hooks.ts";

export const ORIGIN = "http://linkgate.test";

/**
 * linkgate on `backend` as the issuer at ORIGIN, for the calling describe block's tests: `h` is
 * its harness (started in beforeAll, closed in afterAll), and the rest what those tests say to it.
 */
export function oidcHarness(backend: Backend) {
  const h = harnessFor(backend, { env: { LINKGATE_ISSUER: ORIGIN } });
  let n = 0;
  const asUser = (token: string) => ({ authorization: `Bearer ${token}` });
  return {
    h,
    /** An address no other test of the file signs in with; `who` says whose it is. */
    email: (who = "user") => `${who}.${++n}@example.com`,
    /** linkgate's own sign-in token, or an app's token alone. */
    asUser,
    /** An app calling the API the way a front end does: its token with the publishable key. */
    asApp: (token: string) => ({ ...asUser(token), "x-api-key": h.publishableKey }),
    userinfo: (token: string) => h.call("GET", "/oauth/userinfo", { headers: asUser(token) }),
  };
}

/**
 * oidcHarness with a first-party app registered in it (registerClient's defaults), and the app's
 * openid-client configuration. `config()` is a function, not a stand-in: openid-client knows a
 * Configuration by its identity.
 */
export function oidcHarnessWithApp(backend: Backend) {
  const issuer = oidcHarness(backend);
  const registered = startedForBlock(
    async () => {
      const app = await registerClient(issuer.h);
      return { app, config: await discover(issuer.h, app) };
    },
    async () => {},
  );
  return { ...issuer, app: standIn(() => registered().app), config: () => registered().config };
}

export type RegisteredClient = { id: string; clientId: string; clientSecret: string | null; redirectUri: string };

export async function registerClient(
  h: Harness,
  opts: { type?: "PUBLIC" | "CONFIDENTIAL"; firstParty?: boolean; redirectUris?: string[]; name?: string; apiKey?: string } = {},
): Promise<RegisteredClient> {
  const redirectUris = opts.redirectUris ?? ["https://app.example/callback"];
  const res = await h.gql(
    `mutation($input: OAuthClientInput!) { createOAuthClient(input: $input) { __typename ... on OAuthClientWithSecret { client { id clientId } clientSecret } ... on Error { message } } }`,
    { input: { name: opts.name ?? "Example app", redirectUris, type: opts.type ?? "CONFIDENTIAL", firstParty: opts.firstParty ?? true } },
    opts.apiKey ? { "x-api-key": opts.apiKey } : undefined,
  );
  const r = res.body.data?.createOAuthClient;
  if (r?.__typename !== "OAuthClientWithSecret") throw new Error(`createOAuthClient: ${JSON.stringify(res.body)}`);
  return { id: r.client.id, clientId: r.client.clientId, clientSecret: r.clientSecret, redirectUri: redirectUris[0] };
}

/**
 * openid-client talking to the in-process app, each request with the Host header a real one
 * carries (a DPoP proof, for one, names the URL it was sent to).
 */
export async function discover(h: Harness, c: RegisteredClient): Promise<client.Configuration> {
  const config = await client.discovery(new URL(ORIGIN), c.clientId, c.clientSecret ?? undefined, c.clientSecret ? undefined : client.None(), {
    execute: [client.allowInsecureRequests],
    [client.customFetch]: (url: string, init: RequestInit) => {
      const headers = new Headers(init.headers);
      headers.set("host", new URL(url).host);
      return h.app.fetch(new Request(url, { ...init, headers } as RequestInit));
    },
  } as never);
  return config;
}

/** A browser: keeps cookies (by name; the tests use one origin) and does not follow redirects itself. */
export class Agent {
  cookies = new Map<string, string>();
  constructor(private readonly h: Harness) {}

  async fetch(url: string, init: { method?: string; body?: unknown } = {}): Promise<Response> {
    const headers: Record<string, string> = { cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ") };
    let body: string | undefined;
    if (init.body !== undefined) {
      body = JSON.stringify(init.body);
      headers["content-type"] = "application/json";
    }
    const res = await this.h.app.fetch(new Request(new URL(url, ORIGIN), { method: init.method ?? "GET", headers, body }));
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const i = pair.indexOf("=");
      const name = pair.slice(0, i).trim();
      const value = pair.slice(i + 1).trim();
      if (!value || /expires=Thu, 01 Jan 1970/i.test(line)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return res;
  }

  async json(url: string, body: unknown): Promise<{ status: number; body: any }> {
    const res = await this.fetch(url, { method: "POST", body });
    return { status: res.status, body: await res.json() };
  }

  /** Follows redirects inside linkgate; returns the first response that leaves it or is not a redirect. */
  async follow(url: string): Promise<Response> {
    let res = await this.fetch(url);
    while (res.status >= 300 && res.status < 400) {
      const next = new URL(res.headers.get("location")!, ORIGIN);
      if (next.origin !== ORIGIN || next.pathname === "/login") return res;
      res = await this.fetch(next.toString());
    }
    return res;
  }
}

export type Authorization = { url: URL; verifier: string; state: string; nonce: string };

export async function authorizationUrl(config: client.Configuration, c: RegisteredClient, extra: Record<string, string> = {}): Promise<Authorization> {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: c.redirectUri,
    scope: "openid email profile offline_access",
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: "S256",
    state,
    nonce,
    ...extra,
  });
  return { url, verifier, state, nonce };
}

/** Runs the authorization up to the /login page; returns the interaction id. */
export async function startInteraction(agent: Agent, url: URL): Promise<string> {
  const res = await agent.follow(url.toString());
  const location = res.headers.get("location");
  if (!location) throw new Error(`expected a redirect to /login, got ${res.status}: ${await res.text()}`);
  const uid = new URL(location, ORIGIN).searchParams.get("interaction");
  if (!uid) throw new Error(`expected /login?interaction=…, got ${location}`);
  return uid;
}

/** Signs in by code on the interaction, as the /login page does; returns what the page is told. */
export async function signInByCode(h: Harness, agent: Agent, uid: string, email: string): Promise<{ status: number; body: any }> {
  const start = await agent.json(`/oauth/interaction/${uid}/otp/start`, { email });
  if (start.status !== 200) throw new Error(`otp/start: ${JSON.stringify(start.body)}`);
  const otp = await h.mailbox.otp(email);
  return agent.json(`/oauth/interaction/${uid}/otp/verify`, { state_id: start.body.state_id, otp });
}

/** The whole authorization for a first-party client: the callback URL with the code. */
export async function authorize(h: Harness, agent: Agent, auth: Authorization, email: string): Promise<URL> {
  const uid = await startInteraction(agent, auth.url);
  const signed = await signInByCode(h, agent, uid, email);
  if (!signed.body.redirectTo) throw new Error(`sign-in did not finish: ${JSON.stringify(signed.body)}`);
  return callback(agent, signed.body.redirectTo);
}

/**
 * The user signs in on /login inside the app's flow and allows what it asks when asked; the app's
 * tokens, its openid-client configuration, and whether the consent page was shown.
 */
export async function approveApp(h: Harness, app: RegisteredClient, email: string, scope: string) {
  const cfg = await discover(h, app);
  const agent = new Agent(h);
  const auth = await authorizationUrl(cfg, app, { scope });
  const uid = await startInteraction(agent, auth.url);
  const signed = await signInByCode(h, agent, uid, email);
  const consentAsked = !!signed.body.consent;
  const redirectTo = consentAsked ? (await agent.json(`/oauth/interaction/${uid}/consent`, { allow: true })).body.redirectTo : signed.body.redirectTo;
  const cb = await callback(agent, redirectTo);
  const tokens = await client.authorizationCodeGrant(cfg, cb, { pkceCodeVerifier: auth.verifier, expectedState: auth.state, expectedNonce: auth.nonce });
  return { tokens, cfg, consentAsked };
}

export async function callback(agent: Agent, resumeUrl: string): Promise<URL> {
  const res = await agent.follow(resumeUrl);
  const location = res.headers.get("location");
  if (!location) throw new Error(`expected the redirect to the client, got ${res.status}: ${await res.text()}`);
  return new URL(location);
}
