// Signing in with an external identity provider in Chromium (issue 27), the upstream a real
// OpenID Connect server on loopback (oidc-provider, test/support/upstream.ts), linkgate on a
// loopback port: (a) "Continue with …" on /login inside an app's OpenID Connect authorization,
// back to the app with a code whose ID token says amr ["fed"], and again to the same account;
// (b) the provider names a verified e-mail an account holds: /login asks for that e-mail's code
// and lands on that account, with the provider attached; (c) an app's own page starts and
// finishes the flow through the REST API (state_id kept in its sessionStorage, cross-origin
// under LINKGATE_CORS_ORIGINS); (d) /account adds the provider's sign-in ("Add …", through the
// provider and back, confirming it's the user first when the sign-in is old) and removes it;
// (g) an account whose only sign-in is external re-authenticates at the provider on /account;
// (e) inside an app's authorization, the e-mail's account is proven by one of its passkeys
// instead of the code; (f) a sign-in cancelled at the provider is said on /login. One browser, a
// fresh context per user.
import { decodeJwt } from "jose";
import * as client from "openid-client";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { chromiumMissing, launchChromium, listen } from "./support/browser.ts";
import { backends } from "./support/db.ts";
import { authorizationUrl, registerClient, type RegisteredClient } from "./support/oidc.ts";
import { openDevice, type Device } from "./support/pages.ts";
import { startUpstreamOidc, type UpstreamOidc, type UpstreamUser } from "./support/upstream.ts";

let browserReady: Promise<Browser> | null = null;
const sharedBrowser = () => (browserReady ??= launchChromium());
afterAll(async () => {
  if (browserReady) await (await browserReady).close();
});

/**
 * The app of (c): its sign-in page starts the flow with linkgate and keeps state_id in its own
 * sessionStorage; its redirect URI (registered on a first-party client) finishes it.
 */
function appPage(linkgate: string, publishableKey: string, path: string): string {
  const call = `async (path, body) => { const r = await fetch(${JSON.stringify(linkgate)} + path, { method: "POST", headers: { "content-type": "application/json", "x-api-key": ${JSON.stringify(publishableKey)} }, body: JSON.stringify(body) }); return r.json(); }`;
  const script =
    path === "/callback"
      ? `const call = ${call};
         const code = new URLSearchParams(location.search).get("code");
         call("/auth/external/complete", { state_id: sessionStorage.getItem("state_id"), code })
           .then((r) => { document.getElementById("result").textContent = JSON.stringify(r); });`
      : `const call = ${call};
         document.getElementById("go").addEventListener("click", async () => {
           const r = await call("/auth/external/start", { provider: "upstream", redirect_uri: location.origin + "/callback" });
           sessionStorage.setItem("state_id", r.state_id);
           location.assign(r.authorization_url);
         });`;
  return `<!doctype html><title>app</title><button id="go">Sign in with Upstream</button><pre id="result"></pre><script type="module">${script}</script>`;
}

// Each backend has its own site, provider, apps and browser contexts in the shared Chromium, so
// the backends run side by side; the steps of one backend run in order.
describe.skipIf(chromiumMissing).concurrent.each(backends)("external sign-in in a browser on %s", (backend) => {
  let h: Harness;
  let up: UpstreamOidc;
  let origin: string;
  let site: { url: string; close(): Promise<void> };
  let rp: { url: string; close(): Promise<void> };
  let app: { url: string; close(): Promise<void> };
  let registered: RegisteredClient;
  let config: client.Configuration;
  const devices: Device[] = [];

  beforeAll(async () => {
    let served: Harness["app"] | null = null;
    site = await listen((req: Request) => (served ? served.fetch(req) : Promise.resolve(new Response("starting", { status: 503 }))));
    origin = site.url.replace("127.0.0.1", "localhost");
    let appKey = "";
    app = await listen(async (req) => new Response(appPage(origin, appKey, new URL(req.url).pathname), { headers: { "content-type": "text/html" } }));
    h = await startHarness(backend, { env: { LINKGATE_ISSUER: origin, LINKGATE_CORS_ORIGINS: app.url } });
    served = h.app;
    appKey = h.publishableKey;

    up = await startUpstreamOidc();
    const created = await h.gql(
      `mutation($input: IdentityProviderInput!) { createIdentityProvider(input: $input) { __typename ... on IdentityProvider { id callbackUrl } ... on Error { message } } }`,
      { input: { preset: "OIDC", slug: "upstream", displayName: "Upstream", issuer: up.issuer, clientId: up.clientId, clientSecret: up.clientSecret, scopes: ["openid", "email", "profile"] } },
    );
    const { id } = created.body.data.createIdentityProvider;
    expect(created.body.data.createIdentityProvider).toEqual({ __typename: "IdentityProvider", id, callbackUrl: `${origin}/auth/external/${id}/callback` });
    up.addRedirectUri(created.body.data.createIdentityProvider.callbackUrl);

    // the app of (a) is an OAuth client of the project; its callback only has to be somewhere to land
    rp = await listen(async () => new Response("back at the app", { headers: { "content-type": "text/plain" } }));
    registered = await registerClient(h, { type: "CONFIDENTIAL", redirectUris: [`${rp.url}/callback`] });
    config = await client.discovery(new URL(origin), registered.clientId, registered.clientSecret!, undefined, { execute: [client.allowInsecureRequests] });
    // the app of (c) is a first-party client too: its redirect URI is where external sign-ins may
    // return. A server's (CONFIDENTIAL): a public client on a loopback address cannot be first-party
    await registerClient(h, { type: "CONFIDENTIAL", redirectUris: [`${app.url}/callback`], name: "App with its own page" });
  }, 120_000);
  afterAll(async () => {
    for (const d of devices) await d.close().catch(() => {});
    await up?.stop();
    await app?.close();
    await rp?.close();
    await site?.close();
    await h?.close();
  });

  async function device(): Promise<Device> {
    const d = await openDevice(await sharedBrowser());
    devices.push(d);
    return d;
  }

  /** No request left loopback, and the pages had no CSP violation or error. */
  function clean(d: Device) {
    expect(d.requests.filter((u) => !/^http:\/\/(localhost|127\.0\.0\.1):\d+\//.test(u))).toEqual([]);
    expect(d.problems).toEqual([]);
  }

  /** The app's authorization, through /login and the provider, to the app's callback; then its code exchange. */
  async function signInForApp(page: Page, user: UpstreamUser) {
    up.loginAs(user);
    const { url, verifier, state, nonce } = await authorizationUrl(config, registered, { scope: "openid email profile" });
    await page.goto(url.toString());
    await page.waitForURL(/\/login\?interaction=/);
    await page.getByRole("button", { name: "Continue with Upstream" }).click();
    await page.waitForURL(`${registered.redirectUri}?**`);
    return client.authorizationCodeGrant(config, new URL(page.url()), { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce });
  }

  it.sequential("(a) inside an app's authorization: Continue with the provider, back to the app with amr fed; again, the same account", async () => {
    const ada = { sub: "up-ada", email: "ada.external@example.com", email_verified: true, name: "Ada" };
    const first = await device();
    const tokens = await signInForApp(first.page, ada);
    const claims = tokens.claims()!;
    expect(claims).toMatchObject({ aud: registered.clientId, amr: ["fed"] });
    const account = await h.db.prisma.identifier.findFirstOrThrow({ where: { kind: "external", value: `${up.issuer}#${ada.sub}` } });
    expect(account.accountId).toBe(claims.sub);
    clean(first);

    const second = await device();
    const again = await signInForApp(second.page, ada);
    expect(again.claims()).toMatchObject({ sub: claims.sub, amr: ["fed"] });
    clean(second);
  }, 60_000);

  it.sequential("(b) the provider names a verified e-mail an account holds: /login asks for its code and lands on that account", async () => {
    const holder = await h.signIn({ email: "grace.holder@example.com" });
    const d = await device();
    up.loginAs({ sub: "up-grace", email: "grace.holder@example.com", email_verified: true, name: "Grace" });
    await d.page.goto(`${origin}/login`);
    await d.page.getByRole("button", { name: "Continue with Upstream" }).click();
    await d.page.getByText("which already has an account here").waitFor();
    expect(await d.page.locator("strong.value").textContent()).toMatch(/^g.*@example\.com$/);
    expect(new URL(d.page.url()).search).toBe(""); // the return's code is gone from the address
    await d.page.getByLabel("Code").fill(await h.mailbox.otp("grace.holder@example.com"));
    await d.page.getByRole("button", { name: "Sign in" }).click();
    await d.page.waitForURL(`${origin}/account`);
    const session = await d.page.evaluate(() => JSON.parse(sessionStorage.getItem("linkgate.session")!));
    expect(session.accountId).toBe(holder.accountId);
    expect(decodeJwt(session.idToken).amr).toEqual(["fed"]);
    // the account page lists the provider's sign-in by what it said of the user
    const row = d.page.locator(`[data-identifier="${up.issuer}#up-grace"]`);
    await expect.poll(() => row.textContent()).toContain("Sign-in with Upstream");
    expect(await row.textContent()).toContain("grace.holder@example.com");
    clean(d);
  }, 60_000);

  it.sequential("(c) an app's own redirect URI finishes the flow with the state_id it kept", async () => {
    const d = await device();
    up.loginAs({ sub: "up-lin", email: "lin@example.com", email_verified: false, name: "Lin" });
    await d.page.goto(`${app.url}/`);
    await d.page.getByRole("button", { name: "Sign in with Upstream" }).click();
    await d.page.waitForURL(`${app.url}/callback?**`);
    await expect.poll(() => d.page.locator("#result").textContent()).toContain("access_token");
    const result = JSON.parse((await d.page.locator("#result").textContent())!);
    expect(result).toMatchObject({ token_type: "Bearer", account_id: expect.any(String) });
    expect(decodeJwt(result.id_token).amr).toEqual(["fed"]);
    const identifier = await h.db.prisma.identifier.findFirstOrThrow({ where: { kind: "external", value: `${up.issuer}#up-lin` } });
    expect(identifier.accountId).toBe(result.account_id);
    expect(d.problems).toEqual([]);
  }, 60_000);

  it.sequential("(d) /account adds the provider's sign-in through the provider (confirming it's him first), lists it by its e-mail claim, and removes it", async () => {
    const d = await device();
    const { page } = d;
    await page.goto(`${origin}/login`);
    await page.getByLabel("E-mail or phone number").fill("hal@example.com");
    await page.getByRole("button", { name: "Send me a code" }).click();
    await page.getByLabel("Code").fill(await h.mailbox.otp("hal@example.com"));
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${origin}/account`);

    // a sign-in too long ago: adding asks Hal to confirm it's him in place, then goes on to the provider
    const token = await page.evaluate(() => JSON.parse(sessionStorage.getItem("linkgate.session")!).accessToken as string);
    await h.db.prisma.session.update({ where: { id: decodeJwt(token).sid as string }, data: { authTime: new Date(Date.now() - 24 * 3600_000) } });
    up.loginAs({ sub: "up-hal", email: "hal.elsewhere@example.com", email_verified: true, name: "Hal" });
    await page.getByRole("button", { name: "Add Upstream" }).click();
    const dialog = page.getByRole("dialog", { name: "Confirm it's you" });
    await dialog.getByRole("button", { name: "Send a code to hal@example.com" }).click();
    await dialog.getByLabel("Code").fill(await h.mailbox.otp("hal@example.com"));
    await dialog.getByRole("button", { name: "Confirm" }).click();
    await page.getByText("Your Upstream sign-in is now attached to your account.").waitFor();
    expect(new URL(page.url()).search).toBe("");
    const row = page.locator(`[data-identifier="${up.issuer}#up-hal"]`);
    expect(await row.textContent()).toContain("hal.elsewhere@example.com");

    await row.getByRole("button", { name: "Remove Sign-in with Upstream" }).click();
    await page.getByRole("button", { name: "Remove", exact: true }).click();
    await page.getByText("Sign-in with Upstream (hal.elsewhere@example.com) was removed from your account.").waitFor();
    expect(await row.count()).toBe(0);
    clean(d);
  }, 60_000);

  it.sequential("(g) an account whose only sign-in is external confirms it's the user by signing in again at the provider", async () => {
    const d = await device();
    const { page } = d;
    up.loginAs({ sub: "up-gus", email: "gus@elsewhere.example", email_verified: false, name: "Gus" });
    await page.goto(`${origin}/login?return_to=/account`);
    await page.getByRole("button", { name: "Continue with Upstream" }).click();
    await page.waitForURL(`${origin}/account`);
    const token = await page.evaluate(() => JSON.parse(sessionStorage.getItem("linkgate.session")!).accessToken as string);
    const sid = decodeJwt(token).sid as string;
    await h.db.prisma.session.update({ where: { id: sid }, data: { authTime: new Date(Date.now() - 24 * 3600_000) } });

    await page.getByRole("button", { name: "Add Upstream" }).click();
    const dialog = page.getByRole("dialog", { name: "Confirm it's you" });
    await dialog.getByRole("button", { name: "Sign in again with Upstream" }).click();
    await page.getByText("Confirmed with Upstream: make your change again.").waitFor();
    const session = await h.db.prisma.session.findUniqueOrThrow({ where: { id: sid } });
    expect(session.authMethod).toBe("fed");
    expect(Date.now() - session.authTime.getTime()).toBeLessThan(60_000);

    up.loginAs({ sub: "up-gus-work", email: "gus@work.example", email_verified: true, name: "Gus" });
    await page.getByRole("button", { name: "Add Upstream" }).click();
    await page.getByText("Your Upstream sign-in is now attached to your account.").waitFor();
    const added = await h.db.prisma.identifier.findFirstOrThrow({ where: { kind: "external", value: `${up.issuer}#up-gus-work` } });
    expect(added.accountId).toBe(session.accountId);
    clean(d);
  }, 60_000);

  it.sequential("(e) inside an app's authorization, a passkey of the e-mail's account proves it instead of the code", async () => {
    const d = await device();
    const { page } = d;
    await page.goto(`${origin}/login`);
    await page.getByLabel("E-mail or phone number").fill("ivy@example.com");
    await page.getByRole("button", { name: "Send me a code" }).click();
    await page.getByLabel("Code").fill(await h.mailbox.otp("ivy@example.com"));
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${origin}/account`);
    const ivy = await page.evaluate(() => JSON.parse(sessionStorage.getItem("linkgate.session")!).accountId as string);
    await page.getByRole("button", { name: "Add a passkey" }).click();
    await page.getByText(/Passkey “Passkey” added/).waitFor();
    expect(await d.credentials()).toHaveLength(1);

    up.loginAs({ sub: "up-ivy", email: "ivy@example.com", email_verified: true, name: "Ivy" });
    const { url, verifier, state, nonce } = await authorizationUrl(config, registered, { scope: "openid email" });
    await page.goto(url.toString());
    await page.getByRole("button", { name: "Continue with Upstream" }).click();
    await page.getByRole("button", { name: "Use a passkey of that account" }).click();
    await page.waitForURL(`${registered.redirectUri}?**`);
    const tokens = await client.authorizationCodeGrant(config, new URL(page.url()), { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce });
    expect(tokens.claims()!.sub).toBe(ivy);
    const identifier = await h.db.prisma.identifier.findFirstOrThrow({ where: { kind: "external", value: `${up.issuer}#up-ivy` } });
    expect(identifier.accountId).toBe(ivy);
    clean(d);
  }, 60_000);

  it.sequential("(f) the user cancels at the provider: /login says so, and the buttons are there to try again", async () => {
    const d = await device();
    up.refuseNextLogin();
    await d.page.goto(`${origin}/login?return_to=/account`);
    await d.page.getByRole("button", { name: "Continue with Upstream" }).click();
    await d.page.getByRole("alert").filter({ hasText: "The sign-in at the other service was cancelled or refused." }).waitFor();
    // the return's parameters are gone, return_to stays
    expect(new URL(d.page.url()).search).toBe("?return_to=%2Faccount");
    await d.page.getByRole("button", { name: "Continue with Upstream" }).waitFor();
    clean(d);
  }, 60_000);
});
