// OpenID Connect hardening: a redirect URI with credentials, a wildcard or a fragment is refused
// at registration; the pages oidc-provider renders (logout, errors) run no script and carry a
// strict Content-Security-Policy, and logout still works end to end through them.
import { describe, expect, it } from "vitest";
import * as client from "openid-client";
import { backends } from "./support/db.ts";
import { Agent, authorizationUrl, authorize, oidcHarnessWithApp, ORIGIN } from "./support/oidc.ts";

const CREATED = `__typename ... on OAuthClientWithSecret { client { id redirectUris } } ... on Error { message }`;
const UPDATED = `__typename ... on Error { message }`;

describe.each(backends)("OpenID Connect hardening on %s", (backend) => {
  const { h, app, config, email } = oidcHarnessWithApp(backend);

  const create = async (redirectUris: string[]) =>
    (await h.gql(`mutation($input: OAuthClientInput!) { createOAuthClient(input: $input) { ${CREATED} } }`, { input: { name: "Sneaky", redirectUris, type: "PUBLIC" } })).body.data
      .createOAuthClient;
  const update = async (id: string, redirectUris: string[]) =>
    (await h.gql(`mutation($id: ID!, $input: OAuthClientInput!) { updateOAuthClient(id: $id, input: $input) { ${UPDATED} } }`, { id, input: { redirectUris } })).body.data
      .updateOAuthClient;

  const BAD = {
    "a user and password": "https://user:pw@app.example/callback",
    "a user": "https://user@app.example/callback",
    "an empty user part": "https://@app.example/callback",
    "a wildcard host": "https://*.app.example/callback",
    "a wildcard path": "https://app.example/*",
    "a wildcard in an app's scheme URI": "com.example.app:/*",
    "a fragment": "https://app.example/callback#frag",
    "an empty fragment": "https://app.example/callback#",
  };

  for (const [what, uri] of Object.entries(BAD)) {
    it(`a redirect URI with ${what} is bad input, at creation and at update`, async () => {
      expect(await create([uri])).toMatchObject({ __typename: "InvalidRequest", message: expect.stringContaining("redirect URI") });
      expect(await update(app.id, ["https://app.example/callback", uri])).toMatchObject({ __typename: "InvalidRequest" });
      const stored = await h.db.prisma.oAuthClient.findUniqueOrThrow({ where: { id: app.id } });
      expect(stored.redirectUris).toEqual([app.redirectUri]);
    });
  }

  it("ordinary redirect URIs are still accepted", async () => {
    const ok = await create(["https://app.example/callback?from=web", "http://127.0.0.1:8080/cb", "com.example.app:/oauth"]);
    expect(ok).toMatchObject({ __typename: "OAuthClientWithSecret" });
  });

  function expectStrictPage(res: Response, html: string) {
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    expect(html).not.toMatch(/<script/i);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("base-uri 'none'");
    expect(csp).not.toMatch(/unsafe-inline|script-src/);
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    return csp;
  }

  /** The hidden fields of the page's logout form, and where it posts. */
  function logoutForm(html: string) {
    const action = /<form id="op\.logoutForm" method="post" action="([^"]+)"/.exec(html)?.[1];
    const xsrf = /name="xsrf" value="([^"]+)"/.exec(html)?.[1];
    expect(action && xsrf, html).toBeTruthy();
    return { action: new URL(action!.replace(/&#38;/g, "&"), ORIGIN), xsrf: xsrf! };
  }

  async function submit(agent: Agent, form: { action: URL; xsrf: string }, logout: boolean) {
    const body = new URLSearchParams({ xsrf: form.xsrf, ...(logout ? { logout: "yes" } : {}) }).toString();
    const cookie = [...agent.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
    return h.app.fetch(new Request(form.action, { method: "POST", headers: { cookie, "content-type": "application/x-www-form-urlencoded" }, body }));
  }

  it("GET /oauth/logout is a confirmation page with no script under a strict policy, and signing out through it ends the session", async () => {
    const agent = new Agent(h);
    const auth = await authorizationUrl(config(), app);
    const cb = await authorize(h, agent, auth, email("logout"));
    const tokens = await client.authorizationCodeGrant(config(), cb, { pkceCodeVerifier: auth.verifier, expectedState: auth.state, expectedNonce: auth.nonce });
    const viewer = () => h.gql("{ viewer { id } }", {}, { authorization: `Bearer ${tokens.access_token}` });
    expect((await viewer()).body.data.viewer.id).toEqual(expect.any(String));

    const url = client.buildEndSessionUrl(config(), { id_token_hint: tokens.id_token!, post_logout_redirect_uri: app.redirectUri, state: "bye" });
    const res = await agent.fetch(url.toString());
    const html = await res.text();
    expect(res.status).toBe(200);
    expect(html).toContain("Sign out?");
    const csp = expectStrictPage(res, html);
    // the form posts here; the confirmation then redirects to the client, which form-action must allow
    expect(csp).toMatch(/form-action 'self' https:\/\/app\.example(;|$)/);

    const done = await submit(agent, logoutForm(html), true);
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe(`${app.redirectUri}?state=bye`);
    expect((await viewer()).body.errors[0].extensions.code).toBe("UNAUTHENTICATED");
    await expect(client.refreshTokenGrant(config(), tokens.refresh_token!)).rejects.toMatchObject({ error: "invalid_grant" });
  });

  it("with no signed-in session, /oauth/logout asks too instead of submitting itself by script, and the answer leads to the signed-out page", async () => {
    const agent = new Agent(h);
    const res = await agent.fetch("/oauth/logout");
    const html = await res.text();
    expect(res.status).toBe(200);
    expectStrictPage(res, html);
    expect(html).toContain("Sign out?");
    const done = await submit(agent, logoutForm(html), true);
    expect(done.status).toBe(303);
    const success = await agent.fetch(done.headers.get("location")!);
    const page = await success.text();
    expect(page).toContain("You are signed out");
    expectStrictPage(success, page);
  });

  it("the error page of an authorization that cannot go back to the client runs no script under the same policy", async () => {
    const auth = await authorizationUrl(config(), app);
    auth.url.searchParams.set("redirect_uri", "https://elsewhere.example/callback");
    const res = await new Agent(h).fetch(auth.url.toString());
    expect(res.status).toBe(400);
    const html = await res.text();
    expect(html).toContain("This sign-in cannot continue");
    expect(expectStrictPage(res, html)).toContain("form-action 'self'");
    // the app sent a redirect URI it never registered: the page says so
    expect(html).toContain("The app that sent you here made a request we cannot accept");
  });

  it("an error that is not the app's does not blame the app: an expired sign-in says to sign in again", async () => {
    const res = await new Agent(h).fetch("/oauth/authorize/no-such-interaction");
    expect(res.status).toBe(400);
    const html = await res.text();
    expect(html).toContain("This sign-in has expired, or it was started in another browser or tab.");
    expect(html).not.toContain("The app that sent you here");
    expectStrictPage(res, html);
  });
});
