// The Host header is the client's to write: without a trusted proxy nothing vouches for it
// (docs/security.md, "Client addresses and trusted proxies"). The sign-in's way back to the app
// was an absolute URL oidc-provider built on the authorization request's Host, so a request sent
// with `Host: evil.example` was answered with a link to evil.example, not under LINKGATE_ISSUER
// (docs/operations.md: paths, or URLs under the issuer). It is a path now, resolved on the host
// the browser is on, where the interaction's cookies are.
import { describe, expect, it } from "vitest";
import { harnessFor } from "./support/hooks.ts";
import { backends } from "./support/db.ts";
import { authorizationUrl, discover, ORIGIN as ISSUER, registerClient } from "./support/oidc.ts";

describe.each(backends)("a Host header of the client's choosing, on %s", (backend) => {
  const h = harnessFor(backend, { env: { LINKGATE_ISSUER: ISSUER } });

  const asSentTo = (host: string, url: string, init: { method?: string; cookie?: string; json?: unknown } = {}) =>
    h.app.fetch(
      new Request(url.replace(ISSUER, `http://${host}`), {
        method: init.method ?? "GET",
        headers: { host, ...(init.cookie ? { cookie: init.cookie } : {}), ...(init.json ? { "content-type": "application/json" } : {}) },
        body: init.json ? JSON.stringify(init.json) : undefined,
      }),
      { incoming: { socket: { remoteAddress: "127.0.0.1" } } },
    );

  it.each([true, false])("names no other host in the way back to the app (consent allowed: %s)", async (allow) => {
    const app = await registerClient(h, { firstParty: false });
    const { url } = await authorizationUrl(await discover(h, app), app, { scope: "openid email" });
    const host = "evil.example:8443";
    const authorize = await asSentTo(host, url.href);
    expect(authorize.status).toBe(303);
    const cookie = authorize.headers.getSetCookie().map((l) => l.split(";")[0]).join("; ");
    const uid = authorize.headers.get("location")!.split("/").pop()!;
    const email = `host.${allow}.${backend}@example.com`;
    const start = await asSentTo(host, `${ISSUER}/oauth/interaction/${uid}/otp/start`, { method: "POST", cookie, json: { email } });
    expect(start.status).toBe(200);
    const verify = await asSentTo(host, `${ISSUER}/oauth/interaction/${uid}/otp/verify`, {
      method: "POST",
      cookie,
      json: { state_id: (await start.json()).state_id, otp: await h.mailbox.otp(email) },
    });
    expect(verify.status).toBe(200);
    expect(await verify.json()).toHaveProperty("consent");
    const answered = await asSentTo(host, `${ISSUER}/oauth/interaction/${uid}/consent`, { method: "POST", cookie, json: { allow } });
    expect(answered.status).toBe(200);
    const { redirectTo } = await answered.json();
    expect(redirectTo).not.toContain("evil.example");
    expect(redirectTo).toMatch(new RegExp(`^/oauth/authorize/${uid}$`));
  });

  it("the sign-out page posts its form to this host", async () => {
    const res = await asSentTo("evil.example", `${ISSUER}/oauth/logout`);
    expect(res.status).toBe(200);
    const html = await res.text();
    const action = /<form id="op\.logoutForm" method="post" action="([^"]+)"/.exec(html)?.[1];
    expect(action, html).toBe("/oauth/logout/confirm");
  });
});
