// The fake upstreams of test/support/upstream*.ts behave like the real ones to a relying party:
// openid-client 6, the library linkgate uses, runs the whole authorization-code flow against
// them over loopback HTTP. If this file fails, the external-identity tests prove nothing.
import http from "node:http";
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from "jose";
import * as client from "openid-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromiumMissing, launchChromium, listen } from "./support/browser.ts";
import { startUpstreamGithub, startUpstreamOidc, type UpstreamGithub, type UpstreamOidc } from "./support/upstream.ts";

const CALLBACK = "http://linkgate.test/auth/external/callback";

const ada = { sub: "g-ada", email: "ada@example.com", email_verified: true, name: "Ada Lovelace" };
const bob = { sub: "g-bob", email: "bob@example.com", email_verified: false, name: "Bob" };

async function discover(up: UpstreamOidc, opts: { timeout?: number } = {}) {
  const config = await client.discovery(new URL(up.issuer), up.clientId, up.clientSecret, undefined, { execute: [client.allowInsecureRequests], ...opts });
  // ID tokens from the token endpoint are trusted over TLS by default; checking their signature
  // makes the JWKS (and its rotation) part of every flow here.
  client.enableNonRepudiationChecks(config);
  return config;
}

async function signIn(up: UpstreamOidc, config: client.Configuration) {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: CALLBACK,
    scope: "openid email profile",
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: "S256",
    state,
    nonce,
  });
  const callback = await up.followAuthorization(url);
  const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce });
  return { callback, tokens, verifier, state, nonce };
}

describe("upstream OpenID Connect provider (oidc-provider on loopback)", () => {
  let up: UpstreamOidc;
  beforeAll(async () => {
    up = await startUpstreamOidc({ users: [ada, bob] });
    up.addRedirectUri(CALLBACK);
  });
  afterAll(() => up.stop());

  it("runs discovery, PKCE, state and nonce, and the ID token carries the chosen user's claims", async () => {
    const config = await discover(up);
    expect(config.serverMetadata()).toMatchObject({ issuer: up.issuer, code_challenge_methods_supported: ["S256"] });

    up.nextLogin(ada.sub);
    const first = await signIn(up, config);
    expect(`${first.callback.origin}${first.callback.pathname}`).toBe(CALLBACK);
    expect(first.callback.searchParams.get("iss")).toBe(up.issuer); // RFC 9207
    expect(first.tokens.claims()).toMatchObject({ ...ada, iss: up.issuer, aud: up.clientId, nonce: first.nonce });

    up.nextLogin(bob.sub);
    const second = await signIn(up, config);
    expect(second.tokens.claims()).toMatchObject({ sub: bob.sub, email: bob.email, email_verified: false, name: bob.name });

    const info = await client.fetchUserInfo(config, second.tokens.access_token, bob.sub);
    expect(info).toMatchObject({ sub: bob.sub, email: bob.email, email_verified: false });
  });

  it("follows a changed e-mail claim, and signs in the same user again on request", async () => {
    const config = await discover(up);
    up.setUsers([{ ...ada, email: "ada@new.example" }, bob]);
    up.nextLogin(ada.sub);
    expect((await signIn(up, config)).tokens.claims()).toMatchObject({ sub: ada.sub, email: "ada@new.example" });
    up.setUsers([ada, bob]);
    expect((await signIn(up, config)).tokens.claims()).toMatchObject({ sub: ada.sub, email: ada.email });
  });

  it("redeems a code once, with its PKCE verifier only", async () => {
    const config = await discover(up);
    up.nextLogin(ada.sub);
    const { callback, verifier, state, nonce } = await signIn(up, config);
    const replay = client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce });
    await expect(replay).rejects.toMatchObject({ error: "invalid_grant" });

    const verifier2 = client.randomPKCECodeVerifier();
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: CALLBACK,
      scope: "openid",
      code_challenge: await client.calculatePKCECodeChallenge(verifier2),
      code_challenge_method: "S256",
      state,
    });
    const cb = await up.followAuthorization(url);
    const wrongVerifier = client.authorizationCodeGrant(config, cb, { pkceCodeVerifier: client.randomPKCECodeVerifier(), expectedState: state });
    await expect(wrongVerifier).rejects.toMatchObject({ error: "invalid_grant" });
  });

  it("refuses an unregistered redirect URI and a missing PKCE challenge with a page, not a redirect", async () => {
    const config = await discover(up);
    const elsewhere = client.buildAuthorizationUrl(config, { redirect_uri: "http://evil.test/cb", scope: "openid", code_challenge: "x".repeat(43), code_challenge_method: "S256" });
    await expect(up.followAuthorization(elsewhere)).rejects.toThrow(/answered 400/);
    const noPkce = client.buildAuthorizationUrl(config, { redirect_uri: CALLBACK, scope: "openid" });
    const cb = await up.followAuthorization(noPkce);
    expect(cb.searchParams.get("error")).toBe("invalid_request");
  });

  it("sends the user's refusal back to the app as error=access_denied", async () => {
    const config = await discover(up);
    up.refuseNextLogin();
    const state = client.randomState();
    const url = client.buildAuthorizationUrl(config, { redirect_uri: CALLBACK, scope: "openid", code_challenge: "a".repeat(43), code_challenge_method: "S256", state });
    const cb = await up.followAuthorization(url);
    expect(cb.searchParams.get("error")).toBe("access_denied");
    expect(cb.searchParams.get("state")).toBe(state);
  });

  it("rotates keys: tokens signed by the new key validate, with the cached JWKS and after a fresh discovery", async () => {
    const config = await discover(up);
    up.nextLogin(ada.sub);
    const before = await signIn(up, config);
    const oldKid = decodeProtectedHeader(before.tokens.id_token!).kid;
    expect(oldKid).toBe(up.currentKid());

    await up.rotateKeys();
    const after = await signIn(up, config); // same Configuration: its JWKS is cached
    expect(decodeProtectedHeader(after.tokens.id_token!).kid).toBe(up.currentKid());
    expect(up.currentKid()).not.toBe(oldKid);

    await up.rotateKeys({ unannounced: true });
    const fresh = await discover(up);
    const third = await signIn(up, fresh);
    expect(decodeProtectedHeader(third.tokens.id_token!).kid).toBe(up.currentKid());

    // Retired keys stay published, so tokens issued before a rotation still verify.
    const jwks = createRemoteJWKSet(new URL(fresh.serverMetadata().jwks_uri!));
    await expect(jwtVerify(before.tokens.id_token!, jwks, { issuer: up.issuer, audience: up.clientId })).resolves.toBeTruthy();
  });

  it("signWithUnpublishedKey: ID tokens from the token endpoint no longer verify against the JWKS", async () => {
    const other = await startUpstreamOidc({ users: [ada] });
    try {
      other.addRedirectUri(CALLBACK);
      other.signWithUnpublishedKey(true);
      const jwks = await (await fetch(`${other.issuer}/jwks`)).json();
      expect(jwks.keys.map((k: { kid: string }) => k.kid)).not.toContain(other.currentKid());
      await expect(signIn(other, await discover(other))).rejects.toThrow(/no applicable keys found/);
      other.signWithUnpublishedKey(false);
      expect((await signIn(other, await discover(other))).tokens.claims()?.sub).toBe(ada.sub);
    } finally {
      await other.stop();
    }
  });

  it("mints ID tokens for forgery tests: the current key verifies, the unknown one does not", async () => {
    const jwks = createRemoteJWKSet(new URL(`${up.issuer}/jwks`));
    const good = await up.mintIdToken({ sub: ada.sub, nonce: "n" });
    expect((await jwtVerify(good, jwks, { issuer: up.issuer, audience: up.clientId })).payload).toMatchObject({ sub: ada.sub, nonce: "n" });
    const forged = await up.mintIdToken({ sub: ada.sub }, { key: "unknown" });
    await expect(jwtVerify(forged, jwks)).rejects.toThrow();
  });

  it("down() refuses connections at once and up() serves the same issuer again", async () => {
    await up.down();
    const started = Date.now();
    const err = await discover(up).catch((e: unknown) => e);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(causes(err)).toContain("ECONNREFUSED");
    await up.up();
    expect((await discover(up)).serverMetadata().issuer).toBe(up.issuer);
  });

  it("slow() delays every response; a relying party's timeout gives up first", async () => {
    up.slow(400);
    try {
      let started = Date.now();
      await discover(up); // discovery: one request
      expect(Date.now() - started).toBeGreaterThanOrEqual(400);
      started = Date.now();
      const err = await discover(up, { timeout: 0.1 }).catch((e: unknown) => e);
      expect(Date.now() - started).toBeLessThan(400);
      expect(causes(err)).toMatch(/TimeoutError|aborted/i);
    } finally {
      up.slow(0);
    }
  });

  it("keeps two upstreams apart: one's code is unknown to the other", async () => {
    const other = await startUpstreamOidc({ users: [ada] });
    try {
      other.addRedirectUri(CALLBACK);
      const otherConfig = await discover(other);
      const verifier = client.randomPKCECodeVerifier();
      const url = client.buildAuthorizationUrl(otherConfig, { redirect_uri: CALLBACK, scope: "openid", code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: "S256" });
      const code = (await other.followAuthorization(url)).searchParams.get("code")!;
      // Straight to the token endpoint: openid-client would already refuse the callback's `iss`.
      const res = await fetch(`${up.issuer}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ grant_type: "authorization_code", code, redirect_uri: CALLBACK, code_verifier: verifier, client_id: up.clientId, client_secret: up.clientSecret }),
      });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ error: "invalid_grant" });
    } finally {
      await other.stop();
    }
  });
});

describe.skipIf(chromiumMissing)("upstream OpenID Connect provider in Chromium", () => {
  it("a browser just follows redirects to the app's callback, as the user the test chose each time", async () => {
    const up = await startUpstreamOidc({ users: [ada, bob] });
    const app = await listen(async () => new Response("<!doctype html><title>app</title>", { headers: { "content-type": "text/html" } }));
    const browser = await launchChromium();
    try {
      const callback = `${app.url}/auth/external/callback`;
      up.addRedirectUri(callback);
      const config = await discover(up);
      const page = await (await browser.newContext()).newPage();
      // The same browser twice: its upstream session cookie must not sign the first user in again.
      for (const user of [ada, bob]) {
        up.nextLogin(user.sub);
        const verifier = client.randomPKCECodeVerifier();
        const state = client.randomState();
        const url = client.buildAuthorizationUrl(config, { redirect_uri: callback, scope: "openid email profile", code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: "S256", state });
        await page.goto(url.toString());
        await page.waitForURL((u) => u.toString().startsWith(callback));
        const tokens = await client.authorizationCodeGrant(config, new URL(page.url()), { pkceCodeVerifier: verifier, expectedState: state });
        expect(tokens.claims()).toMatchObject({ sub: user.sub, email: user.email });
      }
    } finally {
      await browser.close();
      await app.close();
      await up.stop();
    }
  });
});

describe("upstream GitHub imitation", () => {
  let gh: UpstreamGithub;
  const octo = {
    id: 583231,
    login: "octocat",
    name: "The Octocat",
    email: null,
    emails: [
      { email: "octocat@github.example", primary: true, verified: true, visibility: "private" as const },
      { email: "octo@unverified.example", primary: false, verified: false, visibility: null },
    ],
  };
  const hubot = { id: 2, login: "hubot", name: null, email: "hubot@example.com", emails: [{ email: "hubot@example.com", primary: true, verified: false, visibility: "public" as const }] };
  beforeAll(async () => {
    gh = await startUpstreamGithub({ users: [octo, hubot] });
    gh.addRedirectUri(CALLBACK);
  });
  afterAll(() => gh.stop());

  const configuration = () => {
    const config = new client.Configuration(
      { issuer: gh.baseUrl, authorization_endpoint: `${gh.baseUrl}/login/oauth/authorize`, token_endpoint: `${gh.baseUrl}/login/oauth/access_token` },
      gh.clientId,
      gh.clientSecret,
    );
    client.allowInsecureRequests(config);
    return config;
  };

  async function authorize(scope = "read:user user:email") {
    const config = configuration();
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const url = client.buildAuthorizationUrl(config, { redirect_uri: CALLBACK, scope, state, code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: "S256" });
    return { config, verifier, state, callback: await gh.followAuthorization(url) };
  }

  const api = (token: string, path: string, headers: Record<string, string> = { "user-agent": "linkgate-test" }) =>
    fetch(`${gh.apiUrl}${path}`, { headers: { authorization: `Bearer ${token}`, accept: "application/vnd.github+json", ...headers } });

  it("exchanges the code (PKCE, state) and serves /user and /user/emails for the chosen user", async () => {
    gh.nextLogin(octo.id);
    const { config, verifier, state, callback } = await authorize();
    expect(`${callback.origin}${callback.pathname}`).toBe(CALLBACK);
    const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state });
    expect(tokens).toMatchObject({ token_type: "bearer", scope: "read:user,user:email" });
    expect(tokens.access_token).toMatch(/^gho_/);

    const user = await api(tokens.access_token, "/user");
    expect(user.status).toBe(200);
    expect(await user.json()).toMatchObject({ id: octo.id, login: "octocat", name: "The Octocat", email: null, type: "User" });
    const emails = await api(tokens.access_token, "/user/emails");
    expect(await emails.json()).toEqual(octo.emails);

    gh.nextLogin(hubot.id);
    const again = await authorize();
    const hubotTokens = await client.authorizationCodeGrant(config, again.callback, { pkceCodeVerifier: again.verifier, expectedState: again.state });
    expect(await (await api(hubotTokens.access_token, "/user")).json()).toMatchObject({ id: 2, login: "hubot", email: "hubot@example.com" });
  });

  it("answers a bad or reused code GitHub's way: HTTP 200 with error", async () => {
    gh.nextLogin(octo.id);
    const { callback, verifier } = await authorize();
    const exchange = (accept?: string) =>
      fetch(`${gh.baseUrl}/login/oauth/access_token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", ...(accept ? { accept } : {}) },
        body: new URLSearchParams({ client_id: gh.clientId, client_secret: gh.clientSecret, code: callback.searchParams.get("code")!, redirect_uri: CALLBACK, code_verifier: verifier }),
      });
    const first = await exchange(); // without Accept: form-encoded, as GitHub does
    expect(first.headers.get("content-type")).toMatch(/x-www-form-urlencoded/);
    expect(new URLSearchParams(await first.text()).get("access_token")).toMatch(/^gho_/);
    const reused = await exchange("application/json");
    expect(reused.status).toBe(200);
    expect(await reused.json()).toMatchObject({ error: "bad_verification_code" });
  });

  it("keeps GitHub's refusals: wrong secret, missing user:email scope, no User-Agent, bad token", async () => {
    const wrongSecret = await fetch(`${gh.baseUrl}/login/oauth/access_token`, {
      method: "POST",
      headers: { accept: "application/json", "content-type": "application/json" },
      body: JSON.stringify({ client_id: gh.clientId, client_secret: "nope", code: "x" }),
    });
    expect(await wrongSecret.json()).toMatchObject({ error: "incorrect_client_credentials" });

    gh.nextLogin(octo.id);
    const { config, verifier, state, callback } = await authorize("read:user");
    const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state });
    expect((await api(tokens.access_token, "/user/emails")).status).toBe(404);
    expect(await statusWithoutUserAgent(`${gh.apiUrl}/user`, tokens.access_token)).toBe(403);
    expect((await api("gho_forged", "/user")).status).toBe(401);
  });

  it("sends the user's refusal and an unregistered redirect URI back as errors", async () => {
    gh.refuseNextLogin();
    expect((await authorize()).callback.searchParams.get("error")).toBe("access_denied");
    const url = new URL(`${gh.baseUrl}/login/oauth/authorize`);
    url.search = new URLSearchParams({ client_id: gh.clientId, redirect_uri: "http://evil.test/cb", state: "s" }).toString();
    const cb = await gh.followAuthorization(url);
    expect(`${cb.origin}${cb.pathname}`).toBe(CALLBACK);
    expect(cb.searchParams.get("error")).toBe("redirect_uri_mismatch");
  });

  it("down() refuses connections, slow() delays and fail() breaks one path, with the same URLs", async () => {
    await gh.down();
    expect(causes(await fetch(`${gh.apiUrl}/user`).catch((e: unknown) => e))).toContain("ECONNREFUSED");
    await gh.up();
    gh.slow(300);
    const started = Date.now();
    expect((await fetch(`${gh.apiUrl}/user`, { headers: { "user-agent": "t" } })).status).toBe(401);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    gh.slow(0);
    gh.fail("/api/v3/user/emails", 502);
    expect((await fetch(`${gh.apiUrl}/user/emails`)).status).toBe(502);
    expect((await fetch(`${gh.apiUrl}/user`)).status).toBe(401);
    gh.fail(null);
    expect((await fetch(`${gh.apiUrl}/user/emails`)).status).toBe(401);
  });
});

/** fetch always sends a User-Agent ("node"); node:http sends none unless told. */
function statusWithoutUserAgent(url: string, token: string): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    http.get(url, { headers: { authorization: `Bearer ${token}` } }, (res) => (res.resume(), resolve(res.statusCode))).on("error", reject);
  });
}

/** An error's message, name and code with all its causes, to match on what the network said. */
function causes(err: unknown): string {
  const out: string[] = [];
  for (let e = err as any; e; e = e.cause) out.push(`${e.name}: ${e.message} ${e.code ?? ""}`);
  return out.join(" <- ");
}
