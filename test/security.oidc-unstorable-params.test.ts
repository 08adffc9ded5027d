// A NUL in a parameter oidc-provider stores as sent (an authorization's state, nonce,
// login_hint, ui_locales; a logout's state) made Postgres refuse the row: anyone's link answered
// 500. Now it is the request's own error (docs/oidc.md, "Errors"): invalid_request sent back to
// the client for an authorization, the error page for a logout.
import { describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { Agent, authorizationUrl, oidcHarnessWithApp, ORIGIN } from "./support/oidc.ts";

describe.each(backends)("OpenID Connect parameters Postgres cannot store on %s", (backend) => {
  const { h, app, config } = oidcHarnessWithApp(backend);

  it("an authorization with a NUL in state, nonce, login_hint or ui_locales is invalid_request at the client, with no code", async () => {
    for (const [param, value] of [["state", "\u0000"], ["nonce", "a\u0000b"], ["login_hint", "\u0000"], ["ui_locales", "en\u0000"], ["acr_values", "\u0000"], ["display", "page\u0000"]]) {
      const auth = await authorizationUrl(config(), app);
      auth.url.searchParams.set(param, value);
      const res = await new Agent(h).fetch(`${auth.url.pathname}${auth.url.search}`);
      expect(res.status, `${param}: ${await res.clone().text()}`).toBe(303);
      const to = new URL(res.headers.get("location")!);
      expect(to.origin + to.pathname, param).toBe(app.redirectUri);
      expect(to.searchParams.get("error"), param).toBe("invalid_request");
      expect(to.searchParams.get("error_description"), param).toBe(`${param} contains a character that cannot be accepted`);
      expect(to.searchParams.has("code"), param).toBe(false);
    }
    // the same request without it goes on to the sign-in page
    const auth = await authorizationUrl(config(), app, { login_hint: "someone@example.com" });
    expect((await new Agent(h).follow(auth.url.toString())).headers.get("location")).toMatch(/^\/login\?interaction=/);
  });

  it("a logout with a NUL in its state is the error page, not a 500", async () => {
    for (const query of ["state=%00", `client_id=${app.clientId}&post_logout_redirect_uri=${encodeURIComponent(app.redirectUri)}&state=a%00b`]) {
      const res = await h.app.fetch(new Request(`${ORIGIN}/oauth/logout?${query}`, { headers: { accept: "text/html" } }));
      const body = await res.text();
      expect([res.status, res.headers.get("location")], query).toEqual([400, null]);
      expect(res.headers.get("content-type"), query).toMatch(/^text\/html/);
      expect(body, query).toContain("state contains a character that cannot be accepted");
      expect(body, query).not.toMatch(/<script|<form/);
      expect(res.headers.get("content-security-policy"), query).toMatch(/default-src 'none'/);
    }
    const ok = await h.app.fetch(new Request(`${ORIGIN}/oauth/logout?state=fine`, { headers: { accept: "text/html" } }));
    expect(ok.status).toBe(200);
  });
});
