// A real OpenID Connect client, end to end: openid-client against linkgate on a loopback port,
// the hosted /login page in Chromium signing in by code (the code really mailed), back to the
// client's own callback server; then the code exchange, ID-token validation (openid-client, and
// jose against the remote JWKS), the access token through oauth4webapi's RFC 9068 validation,
// userinfo, two refreshes, RP-initiated logout, and revocation.
import { createRemoteJWKSet, jwtVerify } from "jose";
import * as oauth from "oauth4webapi";
import * as client from "openid-client";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { chromiumMissing, launchChromium, listen } from "./support/browser.ts";
import { backends } from "./support/db.ts";
import { authorizationUrl, registerClient, type RegisteredClient } from "./support/oidc.ts";

let browserReady: Promise<Browser> | null = null;
const sharedBrowser = () => (browserReady ??= launchChromium());
afterAll(async () => {
  if (browserReady) await (await browserReady).close();
});

// Each backend has its own linkgate, client and browser contexts in the shared Chromium, so the
// backends run side by side; the steps of one backend run in order.
describe.skipIf(chromiumMissing).concurrent.each(backends)("a real OpenID Connect client on %s", (backend) => {
  let h: Harness;
  let origin: string;
  let rp: { url: string; close(): Promise<void> };
  let site: { url: string; close(): Promise<void> };
  let registered: RegisteredClient;
  let config: client.Configuration;

  beforeAll(async () => {
    let app: Harness["app"] | null = null;
    site = await listen((req: Request) => (app ? app.fetch(req) : Promise.resolve(new Response("starting", { status: 503 }))));
    origin = site.url.replace("127.0.0.1", "localhost");
    h = await startHarness(backend, { env: { LINKGATE_ISSUER: origin } });
    app = h.app;
    // the client app: its callback only has to be somewhere the browser can land
    rp = await listen(async () => new Response("back at the app", { headers: { "content-type": "text/plain" } }));
    registered = await registerClient(h, { type: "CONFIDENTIAL", redirectUris: [`${rp.url}/callback`] });
    config = await client.discovery(new URL(origin), registered.clientId, registered.clientSecret!, undefined, { execute: [client.allowInsecureRequests] });
  }, 120_000);
  afterAll(async () => {
    await rp?.close();
    await site?.close();
    await h?.close();
  });

  /** From the authorization URL through /login (by code) to the client's callback. */
  async function signInInBrowser(page: Page, email: string) {
    const { url, verifier, state, nonce } = await authorizationUrl(config, registered);
    await page.goto(url.toString());
    await page.waitForURL(/\/login\?interaction=/);
    await page.getByLabel("E-mail or phone number").fill(email);
    await page.getByRole("button", { name: "Send me a code" }).click();
    await page.getByLabel("Code").fill(await h.mailbox.otp(email));
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${registered.redirectUri}?**`);
    return client.authorizationCodeGrant(config, new URL(page.url()), { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce });
  }

  const apiCall = (accessToken: string) =>
    fetch(`${origin}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": h.apiKey, authorization: `Bearer ${accessToken}` },
      body: JSON.stringify({ query: "{ viewer { id } }" }),
    }).then((r) => r.json());

  it.sequential("signs in, validates every token, refreshes twice, logs out, and revokes", async () => {
    const browser = await sharedBrowser();
    const context = await browser.newContext();
    const page = await context.newPage();
    page.setDefaultTimeout(15_000);
    try {
      const tokens = await signInInBrowser(page, "grace@example.com");
      const claims = tokens.claims()!;
      expect(claims).toMatchObject({ aud: registered.clientId, email: "grace@example.com", amr: ["otp"] });

      const { payload } = await jwtVerify(tokens.id_token!, createRemoteJWKSet(new URL(`${origin}/.well-known/jwks.json`)), {
        issuer: origin,
        audience: registered.clientId,
      });
      expect(payload.sub).toBe(claims.sub);

      const as = config.serverMetadata() as oauth.AuthorizationServer;
      const request = new Request(`${origin}/graphql`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
      const at = await oauth.validateJwtAccessToken(as, request, h.projectId, { [oauth.allowInsecureRequests]: true });
      expect(at).toMatchObject({ sub: claims.sub, client_id: registered.clientId, aud: h.projectId });
      expect((await apiCall(tokens.access_token)).data.viewer.id).toBe(claims.sub);

      const info = await client.fetchUserInfo(config, tokens.access_token, claims.sub);
      expect(info).toMatchObject({ sub: claims.sub, email: "grace@example.com", email_verified: true });

      const first = await client.refreshTokenGrant(config, tokens.refresh_token!);
      const second = await client.refreshTokenGrant(config, first.refresh_token!);
      expect(second.claims()!.sub).toBe(claims.sub);
      expect((await apiCall(second.access_token)).data.viewer.id).toBe(claims.sub);

      // RP-initiated logout ends the session: its tokens stop working
      await page.goto(client.buildEndSessionUrl(config, { id_token_hint: second.id_token!, post_logout_redirect_uri: registered.redirectUri, state: "bye" }).toString());
      await page.getByRole("button", { name: "Sign out" }).click();
      await page.waitForURL(`${registered.redirectUri}?state=bye`);
      expect((await apiCall(second.access_token)).errors[0].extensions.code).toBe("UNAUTHENTICATED");
      await expect(client.refreshTokenGrant(config, second.refresh_token!)).rejects.toMatchObject({ error: "invalid_grant" });

      // revoking a refresh token (RFC 7009) ends its session too
      const again = await signInInBrowser(page, "grace@example.com");
      expect(again.claims()!.sub).toBe(claims.sub);
      await client.tokenRevocation(config, again.refresh_token!);
      await expect(client.refreshTokenGrant(config, again.refresh_token!)).rejects.toMatchObject({ error: "invalid_grant" });
      expect((await apiCall(again.access_token)).errors[0].extensions.code).toBe("UNAUTHENTICATED");
    } finally {
      await context.close();
    }
  }, 120_000);

  it.sequential("another user signs in on the same browser while the first one's provider session lives: each lands at the app as themselves, the previous one signed out", async () => {
    const browser = await sharedBrowser();
    const context = await browser.newContext();
    const page = await context.newPage();
    page.setDefaultTimeout(15_000);
    try {
      const ada = await signInInBrowser(page, "ada.switch@example.com");
      expect((await apiCall(ada.access_token)).data.viewer.id).toBe(ada.claims()!.sub);
      const bob = await signInInBrowser(page, "bob.switch@example.com");
      expect(bob.claims()).toMatchObject({ email: "bob.switch@example.com" });
      expect(bob.claims()!.sub).not.toBe(ada.claims()!.sub);
      expect((await apiCall(bob.access_token)).data.viewer.id).toBe(bob.claims()!.sub);
      // the browser's previous user was signed out of it: her session ended with its tokens
      expect((await apiCall(ada.access_token)).errors[0].extensions.code).toBe("UNAUTHENTICATED");
      const adaAgain = await signInInBrowser(page, "ada.switch@example.com");
      expect(adaAgain.claims()!.sub).toBe(ada.claims()!.sub);
      expect((await apiCall(adaAgain.access_token)).data.viewer.id).toBe(ada.claims()!.sub);
    } finally {
      await context.close();
    }
  }, 120_000);
});
