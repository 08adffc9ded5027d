// Calls that need no credentials but store something (a passkey challenge, an authorization's
// interaction) are bounded per client address: the 61st in ten minutes from one address is
// refused without storing anything, and another address is not affected.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { authorizationUrl, discover, ORIGIN, registerClient } from "./support/oidc.ts";
import { SIGN_IN_OPTIONS_PER_ADDRESS } from "../src/auth/passkeys.ts";
import { PROVIDER_PAGES_PER_ADDRESS } from "../src/oidc/interaction.ts";

describe.each(backends)("state created without credentials, per client address, on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_ISSUER: ORIGIN } });
  });
  afterAll(() => h?.close());

  const challenges = () => h.db.prisma.webauthnChallenge.count({ where: { purpose: "authentication" } });
  const interactions = () => h.db.prisma.oidcPayload.count({ where: { kind: "Interaction" } });

  it("passkey sign-in options: 60 in ten minutes from one address, then 429 RateLimited with Retry-After, over REST and GraphQL alike", async () => {
    expect(SIGN_IN_OPTIONS_PER_ADDRESS).toEqual({ max: 60, windowSeconds: 600 });
    const from = "203.0.113.10";
    const options = (who = from) => h.call("POST", "/auth/passkey/sign-in/options", { headers: { "x-api-key": h.publishableKey }, from: who });
    const gql = (who = from) => h.call("POST", "/graphql", { body: { query: "mutation { startPasskeySignIn }" }, headers: { "x-api-key": h.publishableKey }, from: who });

    for (let i = 0; i < 30; i++) expect((await options()).status).toBe(200);
    for (let i = 0; i < 30; i++) expect((await gql()).body.data.startPasskeySignIn.challenge).toEqual(expect.any(String));
    const stored = await challenges();

    const refused = await options();
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ error: "RateLimited" });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    const refusedGql = await gql();
    expect(refusedGql.status).toBe(429);
    expect(refusedGql.body.data?.startPasskeySignIn ?? null).toBeNull();
    expect(refusedGql.body.errors[0].extensions).toMatchObject({ code: "RATE_LIMITED", error: "RateLimited", retryAfterSeconds: expect.any(Number) });
    expect(await challenges()).toBe(stored);

    // another client address still gets options
    expect((await options("198.51.100.20")).status).toBe(200);
    expect((await gql("198.51.100.20")).body.data.startPasskeySignIn.challenge).toEqual(expect.any(String));
  });

  it("authorization requests: 60 in ten minutes from one address, then a 429 page (no redirect, no interaction stored)", async () => {
    expect(PROVIDER_PAGES_PER_ADDRESS).toEqual({ max: 60, windowSeconds: 600 });
    const app = await registerClient(h);
    const config = await discover(h, app);
    const from = "203.0.113.11";
    const authorize = async (who = from) => {
      const auth = await authorizationUrl(config, app);
      return h.call("GET", `${auth.url.pathname}${auth.url.search}`, { from: who });
    };

    for (let i = 0; i < 60; i++) {
      const res = await authorize();
      expect(res.status).toBe(303);
      expect(res.headers.get("location")).toMatch(/^\/oauth\/interaction\//);
    }
    const stored = await interactions();

    const refused = await authorize();
    expect(refused.status).toBe(429);
    expect(refused.headers.get("location")).toBeNull();
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(refused.headers.get("content-type")).toMatch(/^text\/html/);
    expect(refused.body).toContain("Too many requests");
    expect(refused.headers.get("content-security-policy")).toContain("default-src 'none'");
    expect(await interactions()).toBe(stored);

    const other = await authorize("2001:db8::1");
    expect(other.status).toBe(303);
    // an IPv6 client is counted by its /64: sixty addresses of one /64 use up its one budget
    const v6 = "2001:db8:0:7::";
    for (let i = 1; i <= 60; i++) expect((await authorize(`${v6}${i.toString(16)}`)).status).toBe(303);
    expect((await authorize(`${v6}ffff`)).status).toBe(429);
  });

  // 30th review: counted before anything was checked, sixty images on any web page locked the
  // page's visitors out of signing in to every app for ten minutes
  it("authorization requests a web page makes a visitor's browser send (images, frames) are counted apart from the ones it navigates to", async () => {
    const app = await registerClient(h);
    const config = await discover(h, app);
    const from = "203.0.113.13";
    const authorize = async (dest?: string) => {
      const auth = await authorizationUrl(config, app);
      return h.call("GET", `${auth.url.pathname}${auth.url.search}`, { from, headers: dest ? { "sec-fetch-dest": dest, "sec-fetch-site": "cross-site" } : {} });
    };
    for (let i = 0; i < 30; i++) expect((await h.call("GET", "/oauth/authorize", { from, headers: { "sec-fetch-dest": "image" } })).status).toBe(400);
    for (let i = 0; i < 30; i++) expect((await authorize("iframe")).status).toBe(303);
    expect((await authorize("image")).status).toBe(429);
    // the visitor's own sign-in, a navigation, still starts
    const own = await authorize("document");
    expect(own.status).toBe(303);
    expect(own.headers.get("location")).toMatch(/^\/oauth\/interaction\//);
  });

  it("logout pages without a session (each stores a provider session for its form): the same bound, then a 429 page, nothing stored", async () => {
    const from = "203.0.113.12";
    const sessions = () => h.db.prisma.oidcPayload.count({ where: { kind: "Session" } });
    const logout = (who = from) => h.call("GET", "/oauth/logout", { from: who });
    for (let i = 0; i < PROVIDER_PAGES_PER_ADDRESS.max; i++) expect((await logout()).status).toBe(200);
    const stored = await sessions();
    const refused = await logout();
    expect(refused.status).toBe(429);
    expect(refused.body).toContain("Too many requests");
    expect(await sessions()).toBe(stored);
    expect((await logout("198.51.100.21")).status).toBe(200);
  });
});
