// The OpenID Connect provider's browser session names one account (docs/oidc.md). When an app's
// project does not hold that account (another project's app in the same browser, an account
// deleted since), every authorization in that browser answered 500 for the cookie's 30 days:
// the user is asked to sign in instead. And a client_id no row can hold (a NUL in it) is an
// unknown client, not a 500.
import * as client from "openid-client";
import { describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { Agent, authorizationUrl, authorize, discover, oidcHarnessWithApp, ORIGIN, registerClient, signInByCode, startInteraction } from "./support/oidc.ts";

describe.each(backends)("OpenID Connect sessions on %s", (backend) => {
  const { h, app, config, email } = oidcHarnessWithApp(backend);

  /** Signs the browser in through this project's app; the account's id. */
  async function signedInBrowser(agent: Agent, who: string): Promise<string> {
    const auth = await authorizationUrl(config(), app);
    const cb = await authorize(h, agent, auth, who);
    const tokens = await client.authorizationCodeGrant(config(), cb, { pkceCodeVerifier: auth.verifier, expectedState: auth.state, expectedNonce: auth.nonce });
    return tokens.claims()!.sub;
  }

  it("another project's app in the same browser asks the user to sign in", async () => {
    const agent = new Agent(h);
    await signedInBrowser(agent, email("ada"));

    const created = await h.gql(`mutation { createProject(name: "other") { ... on CreateProjectPayload { secretKey } } }`, {}, { "x-admin-token": h.adminToken });
    const other = await registerClient(h, { apiKey: created.body.data.createProject.secretKey });
    const auth = await authorizationUrl(await discover(h, other), other);
    const uid = await startInteraction(agent, auth.url);
    // the sign-in takes, and the provider then switches the browser's session to the new
    // account as it does for any other user (test/oidc.flow.browser.test.ts, "another user")
    const signed = await signInByCode(h, agent, uid, email("bea"));
    expect(signed.status, JSON.stringify(signed.body)).toBe(200);
    expect(signed.body.redirectTo).toEqual(expect.any(String));
  });

  it("an account deleted since the browser signed in is asked to sign in again", async () => {
    const agent = new Agent(h);
    const gone = await signedInBrowser(agent, email("cy"));
    await h.db.prisma.account.delete({ where: { id: gone } });
    const auth = await authorizationUrl(config(), app);
    const uid = await startInteraction(agent, auth.url);
    expect(uid).toEqual(expect.any(String));
  });

  it("a client_id with a NUL in it is an unknown client on every endpoint, never a 500", async () => {
    const nul = encodeURIComponent("lgc_\0x");
    const form = { "content-type": "application/x-www-form-urlencoded" };
    const answers = await Promise.all([
      h.app.fetch(new Request(`${ORIGIN}/oauth/authorize?client_id=${nul}&response_type=code&scope=openid&redirect_uri=${encodeURIComponent(app.redirectUri)}`)),
      h.app.fetch(new Request(`${ORIGIN}/oauth/token`, { method: "POST", headers: form, body: `grant_type=authorization_code&code=x&client_id=${nul}` })),
      h.app.fetch(new Request(`${ORIGIN}/oauth/revoke`, { method: "POST", headers: form, body: `token=x&client_id=${nul}` })),
      h.app.fetch(new Request(`${ORIGIN}/oauth/logout?client_id=${nul}`)),
    ]);
    for (const res of answers) {
      expect(res.status, `${res.url}: ${await res.clone().text()}`).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
    }
  });
});
