// CORS at the token and revocation endpoints (docs/oidc.md, "CORS"): a page may read their
// answers only from the origin of one of its public client's redirect URIs. Another site's page
// gets no Access-Control-Allow-Origin, on the request or on its preflight, whatever it sends
// (another client's code, an unknown client id, no client at all), and what it sent spends
// nothing: the app's own page still exchanges the code and refreshes, with openid-client.
import * as client from "openid-client";
import { describe, expect, it } from "vitest";
import { isPublicClientOrigin } from "../src/oidc/clients.ts";
import { backends } from "./support/db.ts";
import type { Harness } from "./support/app.ts";
import { Agent, authorizationUrl, authorize, oidcHarness, ORIGIN, registerClient, type RegisteredClient } from "./support/oidc.ts";

const SPA = "https://spa.example";
const FOREIGN = "https://evil.example";
const TOKEN = "/oauth/token";
const REVOKE = "/oauth/revoke";

/** openid-client as a page at `origin` runs it: every request carries that Origin; `seen` holds the answers' headers. */
async function pageClient(h: Harness, c: RegisteredClient, origin: string) {
  const seen: Headers[] = [];
  const config = await client.discovery(new URL(ORIGIN), c.clientId, undefined, client.None(), {
    execute: [client.allowInsecureRequests],
    [client.customFetch]: async (url: string, init: RequestInit) => {
      const headers = new Headers(init.headers);
      headers.set("origin", origin);
      const res = await h.app.fetch(new Request(url, { ...init, headers } as RequestInit));
      seen.push(res.headers);
      return res;
    },
  } as never);
  return { config, seen };
}

const preflight = (h: Harness, path: string, origin: string | undefined, requestHeaders = "dpop") =>
  h.app.fetch(
    new Request(`${ORIGIN}${path}`, {
      method: "OPTIONS",
      headers: { ...(origin ? { origin } : {}), "access-control-request-method": "POST", "access-control-request-headers": requestHeaders },
    }),
  );

/** A form POST as a page's fetch sends it: a CORS simple request, which no preflight precedes. */
const post = (h: Harness, path: string, origin: string, form: Record<string, string>, headers: Record<string, string> = {}) =>
  h.app.fetch(
    new Request(`${ORIGIN}${path}`, {
      method: "POST",
      headers: { origin, "content-type": "application/x-www-form-urlencoded", ...headers },
      body: new URLSearchParams(form).toString(),
    }),
  );

function expectNoCors(res: Response, what: string) {
  expect(res.headers.get("access-control-allow-origin"), what).toBeNull();
  expect(res.headers.get("access-control-allow-credentials"), what).toBeNull();
  expect(res.headers.get("access-control-allow-methods"), what).toBeNull();
  expect(res.headers.get("access-control-expose-headers"), what).toBeNull();
}

describe.each(backends)("CORS at the token and revocation endpoints on %s", (backend) => {
  const { h, email } = oidcHarness(backend);

  /** A public app at SPA, signed in: the code and PKCE verifier its callback page holds. */
  async function spaWithCode() {
    const spa = await registerClient(h, { type: "PUBLIC", redirectUris: [`${SPA}/callback`] });
    const { config } = await pageClient(h, spa, SPA);
    const auth = await authorizationUrl(config, spa);
    const cb = await authorize(h, new Agent(h), auth, email());
    return { spa, auth, cb, code: cb.searchParams.get("code")! };
  }

  it("another site's page cannot read the token endpoint's answer, and its attempt spends nothing; the app's own page can", async () => {
    const { spa, auth, cb, code } = await spaWithCode();
    const form = { grant_type: "authorization_code", code, code_verifier: auth.verifier, redirect_uri: spa.redirectUri, client_id: spa.clientId };
    const foreign = await post(h, TOKEN, FOREIGN, form);
    expect(foreign.status).toBe(400);
    expectNoCors(foreign, "the code exchanged from another origin");
    for (const origin of ["null", `${SPA}.evil.example`, "http://spa.example", "https://spa.example:8443"]) {
      expectNoCors(await post(h, TOKEN, origin, form), origin);
    }

    // the app's own page, with openid-client: the code is still good
    const page = await pageClient(h, spa, SPA);
    const tokens = await client.authorizationCodeGrant(page.config, cb, { pkceCodeVerifier: auth.verifier, expectedState: auth.state, expectedNonce: auth.nonce });
    expect(tokens.access_token).toBeTruthy();
    const answer = page.seen.at(-1)!;
    expect(answer.get("access-control-allow-origin")).toBe(SPA);
    expect(answer.get("access-control-allow-credentials")).toBeNull();
    expect(answer.get("vary")).toMatch(/origin/i);

    // a refresh from another site is refused unread; the app's own still works
    expectNoCors(await post(h, TOKEN, FOREIGN, { grant_type: "refresh_token", refresh_token: tokens.refresh_token!, client_id: spa.clientId }), "refresh");
    const refreshed = await client.refreshTokenGrant(page.config, tokens.refresh_token!);
    expect(page.seen.at(-1)!.get("access-control-allow-origin")).toBe(SPA);

    // revocation: another site's page is refused unread and the token stays good; the app's own page revokes it
    const foreignRevoke = await post(h, REVOKE, FOREIGN, { token: refreshed.refresh_token!, client_id: spa.clientId });
    expectNoCors(foreignRevoke, "revocation from another origin");
    const again = await client.refreshTokenGrant(page.config, refreshed.refresh_token!);
    await client.tokenRevocation(page.config, again.refresh_token!);
    expect(page.seen.at(-1)!.get("access-control-allow-origin")).toBe(SPA);
    await expect(client.refreshTokenGrant(page.config, again.refresh_token!)).rejects.toMatchObject({ error: "invalid_grant" });
  });

  it("an answer given before any client is known is not readable by another site either", async () => {
    // oidc-provider allowed the page's origin until it found the client: these were readable by
    // any site, and told it which client ids exist
    const refusals: Record<string, string>[] = [
      { grant_type: "authorization_code", code: "x", code_verifier: "y", client_id: "lgc_nobody" },
      { grant_type: "authorization_code", code: "x", code_verifier: "y" },
    ];
    for (const form of refusals) {
      const token = await post(h, TOKEN, FOREIGN, form);
      expect(token.status, JSON.stringify(form)).toBeGreaterThanOrEqual(400);
      expectNoCors(token, `token ${JSON.stringify(form)}`);
      const revoke = await post(h, REVOKE, FOREIGN, { token: "x", ...(form.client_id ? { client_id: form.client_id } : {}) });
      expect(revoke.status).toBeGreaterThanOrEqual(400);
      expectNoCors(revoke, `revoke ${JSON.stringify(form)}`);
    }
    const malformed = await post(h, TOKEN, FOREIGN, { grant_type: "authorization_code", code: "x" }, { authorization: "Basic !!!" });
    expect(malformed.status).toBe(400);
    expectNoCors(malformed, "a malformed Authorization");
  });

  it("a confidential client's endpoints answer no page, even from its redirect URIs' origin", async () => {
    const server = await registerClient(h, { redirectUris: ["https://server.example/callback"] });
    const basic = `Basic ${Buffer.from(`${server.clientId}:${server.clientSecret}`).toString("base64")}`;
    const res = await post(h, TOKEN, "https://server.example", { grant_type: "authorization_code", code: "x", code_verifier: "y" }, { authorization: basic });
    expectNoCors(res, "a confidential client");
    for (const path of [TOKEN, REVOKE]) expectNoCors(await preflight(h, path, "https://server.example", "authorization"), `${path} preflight`);
  });

  it("a preflight, which names no client, is answered only for a public client's origin", async () => {
    await registerClient(h, { type: "PUBLIC", redirectUris: [`${SPA}/callback`, "HTTPS://Spelled.Example:443/cb?x=1", "http://localhost:5173/cb"] });
    for (const path of [TOKEN, REVOKE]) {
      for (const origin of [SPA, "https://spelled.example", "http://localhost:5173"]) {
        const res = await preflight(h, path, origin);
        expect(res.status, `${path} ${origin}`).toBe(204);
        expect(res.headers.get("access-control-allow-origin"), `${path} ${origin}`).toBe(origin);
        expect(res.headers.get("access-control-allow-methods")).toBe("POST");
        expect(res.headers.get("access-control-allow-credentials")).toBeNull();
      }
      for (const origin of [FOREIGN, "null", `${SPA}.evil.example`, "http://spa.example", "https://spa.example:8443", "http://localhost:5174", "https://SPA.example", `${SPA}/`]) {
        const res = await preflight(h, path, origin);
        expectNoCors(res, `${path} ${origin}`);
        expect(res.status, `${path} ${origin}`).toBe(404);
        expect(res.headers.get("vary")).toMatch(/origin/i);
      }
      // an OPTIONS that is no preflight is an unrouted method, as on the API (docs/rest.md)
      const bare = await h.app.fetch(new Request(`${ORIGIN}${path}`, { method: "OPTIONS" }));
      expect(bare.status).toBe(404);
      expect(await bare.json()).toEqual({ error: "NotFound", message: `no route for OPTIONS ${path}` });
    }
  });

  it("a flood of preflights from many origins reads the clients once, and a client added through this gateway counts at once", async () => {
    // the real database, through a client that counts the statements it is asked for
    const known = `https://known-${Date.now()}.example`;
    await registerClient(h, { type: "PUBLIC", redirectUris: [`${known}/callback`] });
    let reads = 0;
    const prisma = new Proxy(h.db.prisma, {
      get: (target, prop, receiver) => (prop === "$queryRaw" ? (...args: unknown[]) => (reads++, (target.$queryRaw as (...a: unknown[]) => unknown)(...args)) : Reflect.get(target, prop, receiver)),
    });
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => isPublicClientOrigin({ prisma }, i === 0 ? known : `https://flood-${i}.example`)));
    expect(answers.filter(Boolean)).toHaveLength(1);
    expect(reads).toBe(1);
    const added = `https://added-${Date.now()}.example`;
    await registerClient(h, { type: "PUBLIC", redirectUris: [`${added}/callback`] });
    expect(await preflight(h, TOKEN, added).then((r) => r.status)).toBe(204);
  });
});
