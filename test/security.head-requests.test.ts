// A HEAD is answered through the GET route (Hono, and oidc-provider's router, both do so), so where
// a GET does something a HEAD did it too. Link scanners (mail and chat previews) and browsers'
// prefetches send HEAD to URLs they see: at an external provider's callback that exchanged the
// code and used up the user's flow, and the user's own GET then got the expired page; at the
// authorization endpoint it stored an interaction without being counted; at a resume URL it
// finished the authorization; at the logout page it stored a session. Each is now 405 with Allow
// and does nothing (docs/rest.md, "Conventions").
import { randomBytes } from "node:crypto";
import * as client from "openid-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";
import { Agent, authorizationUrl, callback as oidcCallback, discover, ORIGIN, registerClient, signInByCode, startInteraction, type RegisteredClient } from "./support/oidc.ts";
import { startUpstreamOidc, type UpstreamOidc } from "./support/upstream.ts";
import { addProvider, callback, complete, freshAddress, landing, start } from "./support/upstream-linkgate.ts";

const tag = `h${randomBytes(3).toString("hex")}`;

describe.each(backends)("a HEAD where a GET does something on %s", (backend) => {
  let h: Harness;
  let google: UpstreamOidc;
  let acme: UpstreamOidc;
  let app: RegisteredClient;

  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_ISSUER: ORIGIN } });
    [google, acme] = await Promise.all([startUpstreamOidc(), startUpstreamOidc()]);
    app = await registerClient(h, { firstParty: true, redirectUris: ["https://app.example/cb"] });
    await addProvider(h, google, "google");
    // a provider made before per-provider callbacks, still on the shared one
    const { id } = await addProvider(h, acme, "acme");
    await h.db.prisma.identityProvider.update({ where: { id }, data: { sharedCallback: true } });
    acme.addRedirectUri(`${ORIGIN}/auth/external/callback`);
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([google?.stop(), acme?.stop()]);
  });

  const head = (url: URL | string) => h.app.fetch(new Request(new URL(url, ORIGIN).toString(), { method: "HEAD" }), { incoming: { socket: { remoteAddress: freshAddress() } } });

  it.each([
    ["its own callback", "google", "/auth/external/idp_"],
    ["the shared callback", "acme", "/auth/external/callback"],
  ])("at an external provider's callback (%s): 405, the flow stays as it was, and the user's GET then signs in", async (_, slug, path) => {
    const up = slug === "google" ? google : acme;
    up.loginAs({ sub: `${tag}-${slug}`, name: "Hedda" });
    const s = await start(h, slug, app.redirectUri);
    expect(s.status, JSON.stringify(s.body)).toBe(200);
    const back = await up.followAuthorization(s.body.authorization_url);
    expect(back.pathname.startsWith(path)).toBe(true);
    const flow = () => h.db.prisma.externalFlow.findUniqueOrThrow({ where: { id: s.body.state_id } });
    const before = await flow();

    const probe = await head(back);
    expect(probe.status).toBe(405);
    expect(probe.headers.get("allow")).toBe("GET, POST");
    expect(probe.headers.get("location")).toBeNull();
    expect(await flow()).toEqual(before);

    const landed = landing(await callback(h, back));
    expect(landed.code).toEqual(expect.any(String));
    const done = await complete(h, s.body.state_id, landed.code!);
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    expect(done.body.access_token).toEqual(expect.any(String));
  });

  it("at the authorization endpoint: 405, no interaction stored; the GET still starts the sign-in", async () => {
    const config = await discover(h, app);
    const auth = await authorizationUrl(config, app);
    const interactions = () => h.db.prisma.oidcPayload.count({ where: { kind: "Interaction" } });
    const stored = await interactions();
    const probe = await head(auth.url);
    expect(probe.status).toBe(405);
    expect(probe.headers.get("allow")).toBe("GET");
    expect(await interactions()).toBe(stored);
    expect((await h.call("GET", `${auth.url.pathname}${auth.url.search}`, { from: freshAddress() })).status).toBe(303);
    expect(await interactions()).toBe(stored + 1);
  });

  it("at the resume URL after signing in: 405, and the browser's GET then gets the app its code", async () => {
    const config = await discover(h, app);
    const agent = new Agent(h);
    const auth = await authorizationUrl(config, app);
    const uid = await startInteraction(agent, auth.url);
    const signed = await signInByCode(h, agent, uid, `${tag}.resume@example.com`);
    const resume = signed.body.redirectTo as string;
    expect(resume).toEqual(expect.any(String));

    const probe = await agent.fetch(resume, { method: "HEAD" });
    expect(probe.status).toBe(405);
    expect(probe.headers.get("allow")).toBe("GET");

    const cb = await oidcCallback(agent, resume);
    const tokens = await client.authorizationCodeGrant(config, cb, { pkceCodeVerifier: auth.verifier, expectedState: auth.state, expectedNonce: auth.nonce });
    expect(tokens.access_token).toEqual(expect.any(String));
  });

  it("at the logout pages: 405, no session stored", async () => {
    const sessions = () => h.db.prisma.oidcPayload.count({ where: { kind: "Session" } });
    const stored = await sessions();
    for (const path of ["/oauth/logout", "/oauth/logout/success"]) {
      const probe = await head(path);
      expect(probe.status).toBe(405);
      expect(probe.headers.get("allow")).toBe("GET");
    }
    expect(await sessions()).toBe(stored);
  });

  it("where a GET only reads, a HEAD is answered as the GET: the provider list, discovery", async () => {
    const providers = await h.app.fetch(new Request(`${ORIGIN}/auth/external/providers`, { method: "HEAD", headers: { "x-api-key": h.publishableKey } }));
    expect(providers.status).toBe(200);
    expect(await providers.text()).toBe("");
    expect((await head("/.well-known/openid-configuration")).status).toBe(200);
  });
});
