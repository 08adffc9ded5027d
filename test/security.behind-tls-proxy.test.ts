// An https issuer behind a TLS-terminating proxy that LINKGATE_TRUSTED_PROXIES does not list (an
// operator who left it unset, or a proxy whose address changed): the gateway sees plain http and
// ignores X-Forwarded-Proto. The OpenID Connect cookies went out without Secure, and the sign-in's
// way back to the app was http://<public host>/oauth/authorize/…, which nginx's TLS port answered
// 400 (walked behind nginx, docs/operations.md "Behind a reverse proxy"). The issuer names the
// scheme browsers use, as it already did for the device cookie.
import { describe, expect, it } from "vitest";
import * as client from "openid-client";
import { harnessFor } from "./support/hooks.ts";
import { backends } from "./support/db.ts";
import { registerClient } from "./support/oidc.ts";

const ISSUER = "https://linkgate.test";

describe.each(backends)("an https issuer behind a TLS proxy that is not trusted, on %s", (backend) => {
  const h = harnessFor(backend, { env: { LINKGATE_ISSUER: ISSUER } });

  /** What the gateway gets: plain http from the proxy with the public Host, its X-Forwarded-Proto ignored. */
  const fromProxy = (url: string, init: { method?: string; cookie?: string; json?: unknown } = {}) =>
    h.app.fetch(
      new Request(url.replace(/^https:/, "http:"), {
        method: init.method ?? "GET",
        headers: { host: "linkgate.test", "x-forwarded-proto": "https", ...(init.cookie ? { cookie: init.cookie } : {}), ...(init.json ? { "content-type": "application/json" } : {}) },
        body: init.json ? JSON.stringify(init.json) : undefined,
      }),
      { incoming: { socket: { remoteAddress: "127.0.0.1" } } },
    );

  it("marks the authorization's cookies Secure and sends the browser back to the app over https", async () => {
    const app = await registerClient(h);
    const config = await client.discovery(new URL(ISSUER), app.clientId, app.clientSecret!, undefined, {
      [client.customFetch]: (url: string, init: RequestInit) => h.app.fetch(new Request(url, init)),
    } as never);
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: app.redirectUri,
      scope: "openid email",
      code_challenge: await client.calculatePKCECodeChallenge(client.randomPKCECodeVerifier()),
      code_challenge_method: "S256",
      state: "s",
    });
    const authorize = await fromProxy(url.href);
    expect(authorize.status).toBe(303);
    const setCookies = authorize.headers.getSetCookie();
    expect(setCookies.length).toBeGreaterThan(0);
    for (const line of setCookies) expect(line, line).toMatch(/;\s*secure/i);

    const cookie = setCookies.map((l) => l.split(";")[0]).join("; ");
    const uid = authorize.headers.get("location")!.split("/").pop()!;
    const email = "tls.proxy@example.com";
    const start = await fromProxy(`${ISSUER}/oauth/interaction/${uid}/otp/start`, { method: "POST", cookie, json: { email } });
    expect(start.status).toBe(200);
    const verify = await fromProxy(`${ISSUER}/oauth/interaction/${uid}/otp/verify`, {
      method: "POST",
      cookie,
      json: { state_id: (await start.json()).state_id, otp: await h.mailbox.otp(email) },
    });
    expect(verify.status).toBe(200);
    // a path, taken on the https page the browser is on (never http://, nor the Host the request named)
    const { redirectTo } = await verify.json();
    expect(redirectTo).toMatch(/^\/oauth\/authorize\//);
    expect(new URL(redirectTo, `${ISSUER}/login`).href.startsWith(`${ISSUER}/oauth/authorize/`)).toBe(true);
  });
});
