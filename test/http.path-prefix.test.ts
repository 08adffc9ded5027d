// linkgate under a path prefix of its public URL (LINKGATE_ISSUER=https://…/auth) behind a
// TLS-terminating reverse proxy that strips the prefix, as docs/operations.md's nginx block does:
// here the proxy is a few lines in front of app.fetch, and the browser keeps cookies by their
// Path, as browsers do. Paths the gateway sent back without the prefix (the interaction redirect,
// the interaction and resume cookies' paths, /login, the pages' files) led the browser out of
// the proxy's location: the authorization never came back to the app, and no page loaded its
// script. test/ui.path-prefix.browser.test.ts walks the pages themselves in Chromium.
import * as client from "openid-client";
import { describe, expect, it } from "vitest";
import { harnessFor } from "./support/hooks.ts";
import { backends } from "./support/db.ts";
import { authorizationUrl, registerClient } from "./support/oidc.ts";
import { startUpstreamOidc } from "./support/upstream.ts";
import { addProvider } from "./support/upstream-linkgate.ts";

const PUBLIC = "https://linkgate.test";
const PREFIX = "/auth";
const ISSUER = `${PUBLIC}${PREFIX}`;

describe.each(backends)("under a path prefix behind a proxy that strips it, on %s", (backend) => {
  const h = harnessFor(backend, { env: { LINKGATE_ISSUER: ISSUER, LINKGATE_TRUSTED_PROXIES: "loopback" } });

  /** nginx's `location /auth/ { proxy_pass http://gateway/; }` with the forwarded headers it is given. */
  async function proxy(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.origin !== PUBLIC || !url.pathname.startsWith(`${PREFIX}/`)) return new Response("not behind the proxy", { status: 404 });
    const headers = new Headers(request.headers);
    headers.set("x-forwarded-for", "203.0.113.9");
    headers.set("x-forwarded-proto", "https");
    headers.set("x-forwarded-host", url.host);
    const inner = new Request(`http://${url.host}${url.pathname.slice(PREFIX.length)}${url.search}`, {
      method: request.method,
      headers,
      body: request.method === "GET" || request.method === "HEAD" ? undefined : await request.arrayBuffer(),
    });
    return h.app.fetch(inner, { incoming: { socket: { remoteAddress: "127.0.0.1" } } });
  }

  /** A browser: sends a cookie only under its Path, and goes where Location says, relative to the page. */
  class Browser {
    private jar: { name: string; value: string; path: string }[] = [];
    async fetch(url: string, init: { method?: string; json?: unknown } = {}): Promise<Response> {
      const target = new URL(url);
      const cookie = this.jar.filter((c) => target.pathname === c.path || target.pathname.startsWith(c.path.endsWith("/") ? c.path : `${c.path}/`));
      const headers: Record<string, string> = { cookie: cookie.map((c) => `${c.name}=${c.value}`).join("; ") };
      if (init.json !== undefined) headers["content-type"] = "application/json";
      const res = await proxy(new Request(target, { method: init.method ?? "GET", headers, body: init.json === undefined ? undefined : JSON.stringify(init.json) }));
      for (const line of res.headers.getSetCookie()) {
        const [pair, ...attributes] = line.split(";").map((s) => s.trim());
        const name = pair.slice(0, pair.indexOf("="));
        const path = attributes.find((a) => /^path=/i.test(a))?.slice(5) ?? "/";
        this.jar = this.jar.filter((c) => !(c.name === name && c.path === path));
        this.jar.push({ name, value: pair.slice(name.length + 1), path });
      }
      return res;
    }
    /** Follows redirects until one leaves the gateway's public URL or an answer is no redirect. */
    async follow(url: string): Promise<{ url: string; res: Response }> {
      let at = url;
      let res = await this.fetch(at);
      while (res.status >= 300 && res.status < 400) {
        at = new URL(res.headers.get("location")!, at).href;
        if (!at.startsWith(`${ISSUER}/`) || new URL(at).pathname === `${PREFIX}/login`) break;
        res = await this.fetch(at);
      }
      return { url: at, res };
    }
  }

  it("runs the authorization code flow: every path it sends the browser is under the prefix, and the app gets its tokens", async () => {
    const app = await registerClient(h);
    const config = await client.discovery(new URL(ISSUER), app.clientId, app.clientSecret!, undefined, {
      [client.customFetch]: (url: string, init: RequestInit) => proxy(new Request(url, init)),
    } as never);
    expect(config.serverMetadata().authorization_endpoint).toBe(`${ISSUER}/oauth/authorize`);

    const { url, verifier, state, nonce } = await authorizationUrl(config, app, { scope: "openid email" });
    const browser = new Browser();
    const first = await browser.fetch(url.href);
    expect(first.status).toBe(303);
    for (const line of first.headers.getSetCookie()) expect(line).toMatch(/path=\/auth\/oauth\/(interaction|authorize)\/[^;]+;.*secure/i);

    const login = await browser.follow(url.href);
    expect(new URL(login.url).pathname).toBe(`${PREFIX}/login`);
    const uid = new URL(login.url).searchParams.get("interaction")!;

    const email = "prefix@example.com";
    const start = await browser.fetch(`${ISSUER}/oauth/interaction/${uid}/otp/start`, { method: "POST", json: { email } });
    expect(start.status).toBe(200);
    const verify = await browser.fetch(`${ISSUER}/oauth/interaction/${uid}/otp/verify`, {
      method: "POST",
      json: { state_id: (await start.json()).state_id, otp: await h.mailbox.otp(email) },
    });
    expect(verify.status).toBe(200);
    const { redirectTo } = await verify.json();
    expect(new URL(redirectTo, login.url).href.startsWith(`${ISSUER}/oauth/authorize/`)).toBe(true);

    const back = await browser.follow(new URL(redirectTo, login.url).href);
    expect(back.url.startsWith(`${app.redirectUri}?`)).toBe(true);
    const tokens = await client.authorizationCodeGrant(config, new URL(back.url), { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce });
    expect(tokens.claims()).toMatchObject({ iss: ISSUER, email });
  });

  it("takes the hosted /login and /account under the prefix as places an external sign-in may return to", async () => {
    const google = await startUpstreamOidc();
    try {
      await addProvider(h, google, "google");
      for (const page of ["login", "account"]) {
        const started = await h.call("POST", "/auth/external/start", { body: { provider: "google", redirect_uri: `${ISSUER}/${page}` } });
        expect(started.status, JSON.stringify(started.body)).toBe(200);
      }
      // the page's path without the prefix is not this gateway's page
      expect((await h.call("POST", "/auth/external/start", { body: { provider: "google", redirect_uri: `${PUBLIC}/login` } })).body.error).toBe("InvalidRedirectUri");
    } finally {
      await google.stop();
    }
  });

  it("serves every page with its files, and the page told its path, under the prefix", async () => {
    for (const page of ["/login", "/account", "/dashboard", "/dashboard/", "/graphql", "/docs"]) {
      const res = await proxy(new Request(`${ISSUER}${page}`, { headers: { accept: "text/html" } }));
      expect(res.status, page).toBe(200);
      const html = await res.text();
      const refs = [...html.matchAll(/\b(?:src|href)="(\/[^"]*)"/g)].map((m) => m[1]);
      expect(refs.length, page).toBeGreaterThan(0);
      for (const ref of refs) {
        expect(ref, `${page}: ${ref}`).toMatch(/^\/auth\//);
        expect((await proxy(new Request(`${PUBLIC}${ref}`))).status, `${page}: ${ref}`).toBe(200);
      }
      if (!["/graphql", "/docs"].includes(page)) expect(html, page).toContain('<meta name="linkgate-base-path" content="/auth" />');
    }
  });
});
