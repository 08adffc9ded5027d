// The external sign-in callback is where an attacker aims (issue 27): forged or replayed
// callbacks (wrong state, a nonce that is not this flow's, a code used twice, a code or ID token
// from another provider) and an upstream that is down or slow must change nothing, answer with a
// clear error within the timeout and never a 500, and leave nothing half-written.
import { randomBytes } from "node:crypto";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";
import { ORIGIN, registerClient, type RegisteredClient } from "./support/oidc.ts";
import { startUpstreamGithub, startUpstreamOidc, type UpstreamGithub, type UpstreamOidc, type UpstreamUser } from "./support/upstream.ts";
import { addProvider, authorize, callback, complete, externalSignIn, landing, snapshot, start } from "./support/upstream-linkgate.ts";

/** linkgate's deadline for each request to a provider (LINKGATE_UPSTREAM_TIMEOUT_MS), short for the test */
const TIMEOUT_MS = 1000;
const tag = `t${randomBytes(3).toString("hex")}`;
let seq = 0;
const googleUser = (): UpstreamUser => ({ sub: `g-${tag}-${++seq}`, email: `g-${tag}-${seq}@example.com`, email_verified: true, name: "Eve" });

describe.each(backends)("external sign-in callbacks under attack and outage on %s", (backend) => {
  let h: Harness;
  let google: UpstreamOidc;
  let acme: UpstreamOidc;
  let github: UpstreamGithub;
  let app: RegisteredClient;

  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_ISSUER: ORIGIN, LINKGATE_UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS) } });
    [google, acme, github] = await Promise.all([startUpstreamOidc(), startUpstreamOidc(), startUpstreamGithub()]);
    app = await registerClient(h, { firstParty: true, redirectUris: ["https://app.example/cb"] });
    await addProvider(h, google, "google");
    await addProvider(h, acme, "acme");
    await addProvider(h, github, "github");
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([google?.stop(), acme?.stop(), github?.stop()]);
  });

  /** The callback's answer must be the 400 page or a redirect to the app with an error, never a code. */
  async function refusedCallback(url: URL, from?: string) {
    const before = await snapshot(h);
    const res = await callback(h, url, { from });
    expect(res.status).not.toBe(500);
    if (res.status === 303) {
      const back = landing(res);
      expect(back.code).toBeNull();
      expect(back.error).toBeTruthy();
    } else {
      expect(res.status).toBe(400);
      expect(res.headers.get("content-type")).toMatch(/text\/html/);
      expect(res.headers.get("location")).toBeNull();
    }
    expect(await snapshot(h)).toEqual(before);
    return res;
  }

  it("an unknown or made-up state: a 400 page, never a redirect", async () => {
    google.loginAs(googleUser());
    const s = await start(h, "google", app.redirectUri);
    const cb = await google.followAuthorization(s.body.authorization_url);
    cb.searchParams.set("state", randomBytes(16).toString("base64url"));
    const res = await refusedCallback(cb);
    expect(res.status).toBe(400);
    const none = new URL(cb);
    none.searchParams.delete("state");
    expect((await refusedCallback(none)).status).toBe(400);
  });

  it("a NUL, an unpaired surrogate or 200 characters in the callback's provider id: the 400 page, not a 500 (eleventh review)", async () => {
    for (const id of ["a%00", "%ED%A0%80", "x".repeat(200)]) {
      const res = await refusedCallback(new URL(`${ORIGIN}/auth/external/${id}/callback?state=abc&code=x`));
      expect(res.status).toBe(400);
    }
  });

  it("the same callback twice (a replayed code): the second is refused and the first sign-in stands alone", async () => {
    google.loginAs(googleUser());
    const s = await start(h, "google", app.redirectUri);
    const cb = await google.followAuthorization(s.body.authorization_url);
    const first = landing(await callback(h, cb));
    expect(first.code).toBeTruthy();
    await refusedCallback(cb);
    const done = await complete(h, s.body.state_id, first.code!);
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    // completing again with the same pair answers the same sign-in (a retry), creating nothing
    const before = await snapshot(h);
    const again = await complete(h, s.body.state_id, first.code!);
    expect(again.status).toBe(200);
    expect(again.body.account_id).toBe(done.body.account_id);
    expect(decodeJwt(again.body.access_token).sid).toBe(decodeJwt(done.body.access_token).sid);
    expect(await snapshot(h)).toEqual(before);
  });

  // 30th review: both exchanged the code, and the loser's failure cancelled the winner's sign-in
  it("the same callback twice at once (a reload, a form posted twice): the code goes to the provider once, and that sign-in completes", async () => {
    google.loginAs(googleUser());
    const s = await start(h, "google", app.redirectUri);
    const cb = await google.followAuthorization(s.body.authorization_url);
    const exchanges = () => google.requests.filter((r) => r.startsWith("POST /token")).length;
    const before = exchanges();
    const answers = await Promise.all([callback(h, cb), callback(h, cb)]);
    expect(exchanges() - before).toBe(1);
    expect(answers.map((a) => a.status).sort()).toEqual([303, 400]);
    const landed = landing(answers.find((a) => a.status === 303)!);
    expect(landed.code).toBeTruthy();
    const done = await complete(h, s.body.state_id, landed.code!);
    expect(done.status, JSON.stringify(done.body)).toBe(200);
  });

  it("a nonce that is not this flow's: the ID token is refused", async () => {
    google.loginAs(googleUser());
    const s = await start(h, "google", app.redirectUri);
    const url = new URL(s.body.authorization_url);
    expect(url.searchParams.get("nonce")).toBeTruthy();
    url.searchParams.set("nonce", randomBytes(16).toString("base64url"));
    await refusedCallback(await google.followAuthorization(url));
  });

  it("another provider's code on this flow's state (mix-up): refused, with or without its iss", async () => {
    const user = googleUser();
    acme.loginAs(user);
    const s = await start(h, "google", app.redirectUri);
    const googleUrl = new URL(s.body.authorization_url);
    // the attacker runs the same request at acme, which they let send codes to Google's callback
    acme.addRedirectUri(googleUrl.searchParams.get("redirect_uri")!);
    const acmeUrl = new URL(`${acme.issuer}/auth`);
    for (const k of ["redirect_uri", "scope", "response_type", "state", "nonce", "code_challenge", "code_challenge_method"]) {
      const v = googleUrl.searchParams.get(k);
      if (v !== null) acmeUrl.searchParams.set(k, v);
    }
    acmeUrl.searchParams.set("client_id", acme.clientId);
    const cb = await acme.followAuthorization(acmeUrl);
    expect(cb.searchParams.get("code")).toBeTruthy();
    const withoutIss = new URL(cb);
    withoutIss.searchParams.delete("iss");
    await refusedCallback(withoutIss);
    await refusedCallback(cb);
  });

  it("an app's code and state from one flow cannot complete another flow", async () => {
    google.loginAs(googleUser());
    const a = await authorize(h, google, "google", app.redirectUri);
    const b = await authorize(h, google, "google", app.redirectUri);
    const before = await snapshot(h);
    expect((await complete(h, a.started.state_id, b.code)).status).toBe(400);
    expect((await complete(h, b.started.state_id, a.code)).status).toBe(400);
    expect(await snapshot(h)).toEqual(before);
  });

  it("another project's API key cannot complete this project's sign-in", async () => {
    google.loginAs(googleUser());
    const a = await authorize(h, google, "google", app.redirectUri);
    const created = await h.gql(`mutation($n: String!) { createProject(name: $n) { __typename ... on CreateProjectPayload { apiKey } } }`, { n: `other-${tag}` }, { "x-admin-token": h.adminToken });
    const otherKey = created.body.data.createProject.apiKey as string;
    const before = await snapshot(h);
    const r = await h.call("POST", "/auth/external/complete", { body: { state_id: a.started.state_id, code: a.code }, headers: { "x-api-key": otherKey } });
    expect(r.status).toBe(400);
    expect(await snapshot(h)).toEqual(before);
    expect((await complete(h, a.started.state_id, a.code)).status).toBe(200);
  });

  it("an ID token signed by a key the upstream's key set does not list is refused, though it came from the token endpoint", async () => {
    const evil = await startUpstreamOidc();
    try {
      await addProvider(h, evil, "evil");
      evil.loginAs({ sub: "forged", email: "forged@example.com", email_verified: true });
      evil.signWithUnpublishedKey(true);
      const before = await snapshot(h);
      const s = await start(h, "evil", app.redirectUri);
      const res = await callback(h, await evil.followAuthorization(s.body.authorization_url));
      expect(landing(res).error).toBe("ExternalSignInFailed");
      expect(await snapshot(h)).toEqual(before);
    } finally {
      await evil.stop();
    }
  });

  it("the upstream rotating its signing key (announced or not) does not break sign-in", async () => {
    google.loginAs(googleUser());
    expect((await externalSignIn(h, google, "google", app.redirectUri)).status).toBe(200);
    await google.rotateKeys();
    expect((await externalSignIn(h, google, "google", app.redirectUri)).status).toBe(200);
    await google.rotateKeys({ unannounced: true });
    const r = await externalSignIn(h, google, "google", app.redirectUri);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
  });

  it("starts are bounded per client address (429); a callback is not counted and still lands past the bound", async () => {
    const from = "203.0.113.77";
    let last = await start(h, "google", app.redirectUri, { from });
    let n = 1;
    while (last.status === 200 && n < 200) {
      last = await start(h, "google", app.redirectUri, { from });
      n++;
    }
    expect(n).toBe(61);
    expect(last.status).toBe(429);
    expect(last.body).toEqual({ error: "RateLimited", message: expect.any(String) });
    // the browser of a flow started elsewhere comes back from that address: its sign-in lands
    google.loginAs(googleUser());
    const elsewhere = await start(h, "google", app.redirectUri);
    const cb = await google.followAuthorization(elsewhere.body.authorization_url);
    expect(landing(await callback(h, cb, { from })).code).toBeTruthy();
  });

  it("a web page's made-up callbacks do not lock its visitor out of external sign-in (30th review)", async () => {
    // a page with an image per made-up state makes its visitor's browser call the callback
    const visitor = "203.0.113.78";
    const provider = (await h.db.prisma.identityProvider.findFirstOrThrow({ where: { projectId: h.projectId, slug: "google" } })).id;
    for (let i = 0; i < 100; i++) {
      const made = new URL(`http://linkgate.test/auth/external/${provider}/callback?state=made-up-${i}&code=x`);
      expect((await callback(h, made, { from: visitor })).status).toBe(400);
    }
    google.loginAs(googleUser());
    const own = await start(h, "google", app.redirectUri, { from: visitor });
    expect(own.status).toBe(200);
    const cb = await google.followAuthorization(own.body.authorization_url);
    expect(landing(await callback(h, cb, { from: visitor })).code).toBeTruthy();
  });

  describe("the upstream down or slow", () => {
    it("down at start (discovery): a clear 502 UpstreamUnavailable at once, nothing stored", async () => {
      const fresh = await startUpstreamOidc();
      try {
        await addProvider(h, fresh, `fresh-${++seq}`);
        await fresh.down();
        const before = await snapshot(h);
        const t = Date.now();
        const r = await start(h, `fresh-${seq}`, app.redirectUri);
        expect(Date.now() - t).toBeLessThan(TIMEOUT_MS);
        expect([502, 504]).toContain(r.status);
        expect(r.body).toEqual({ error: "UpstreamUnavailable", message: expect.any(String) });
        expect(await snapshot(h)).toEqual(before);
      } finally {
        await fresh.stop();
      }
    });

    it("answering with more than 256 KiB (discovery): 502 UpstreamUnavailable, the answer not read past the bound", async () => {
      const fresh = await startUpstreamOidc();
      try {
        await addProvider(h, fresh, `huge-${++seq}`);
        fresh.huge("/.well-known/", 64 * 1024 * 1024);
        const before = await snapshot(h);
        const heap = process.memoryUsage().rss;
        const r = await start(h, `huge-${seq}`, app.redirectUri);
        expect(r.status).toBe(502);
        expect(r.body).toEqual({ error: "UpstreamUnavailable", message: expect.stringContaining("more than 262144 bytes") });
        expect(process.memoryUsage().rss - heap).toBeLessThan(48 * 1024 * 1024); // not the 64 MiB it was sent
        expect(await snapshot(h)).toEqual(before);
      } finally {
        await fresh.stop();
      }
    });

    // 30th review: every process kept each provider's whole discovery document (up to 256 KiB,
    // unknown fields included) for ever, and a project's secret key can add providers
    it("a discovery document with 200 KB of fields this gateway does not use still serves; more than 32 KiB of the ones it keeps is 502", async () => {
      const padded = await startUpstreamOidc({ discovery: { x_pad: "x".repeat(200_000) } });
      // a field it keeps (the upstream fixture computes the others itself)
      const bloated = await startUpstreamOidc({ discovery: { mtls_endpoint_aliases: { token_endpoint: `https://mtls.example/${"t".repeat(40_000)}` } } });
      try {
        await addProvider(h, padded, `padded-${++seq}`);
        const ok = await start(h, `padded-${seq}`, app.redirectUri);
        expect(ok.status, JSON.stringify(ok.body)).toBe(200);
        await addProvider(h, bloated, `bloated-${seq}`);
        const before = await snapshot(h);
        const r = await start(h, `bloated-${seq}`, app.redirectUri);
        expect(r.status).toBe(502);
        expect(r.body).toEqual({ error: "UpstreamUnavailable", message: expect.stringContaining("more than 32 KiB of metadata") });
        expect(await snapshot(h)).toEqual(before);
      } finally {
        await Promise.all([padded.stop(), bloated.stop()]);
      }
    });

    it("down between the sign-in and the callback (token endpoint): back to the app with error=UpstreamUnavailable at once, nothing written", async () => {
      google.loginAs(googleUser());
      const s = await start(h, "google", app.redirectUri);
      const cb = await google.followAuthorization(s.body.authorization_url);
      await google.down();
      try {
        const t = Date.now();
        const res = await refusedCallback(cb);
        expect(Date.now() - t).toBeLessThan(TIMEOUT_MS);
        expect(res.status).toBe(303);
        expect(landing(res).error).toBe("UpstreamUnavailable");
      } finally {
        await google.up();
      }
    });

    it("slow at start (discovery): 502 UpstreamUnavailable after the deadline, nothing stored", async () => {
      const fresh = await startUpstreamOidc();
      try {
        await addProvider(h, fresh, `slow-${++seq}`);
        fresh.slow(60_000);
        const before = await snapshot(h);
        const t = Date.now();
        const r = await start(h, `slow-${seq}`, app.redirectUri);
        expect(Date.now() - t).toBeLessThan(TIMEOUT_MS + 1500);
        expect(r.status).toBe(502);
        expect(r.body).toEqual({ error: "UpstreamUnavailable", message: expect.any(String) });
        expect(await snapshot(h)).toEqual(before);
      } finally {
        await fresh.stop();
      }
    });

    it("GitHub's e-mail API failing after the code exchange: an error, and no account made without knowing its e-mails", async () => {
      const mail = `holder-${tag}@example.com`;
      await h.signIn({ email: mail });
      github.loginAs({ id: 900_000 + ++seq, login: `x${seq}`, name: null, email: null, emails: [{ email: mail, primary: true, verified: true, visibility: null }] });
      const s = await start(h, "github", app.redirectUri);
      const cb = await github.followAuthorization(s.body.authorization_url);
      github.fail("/api/v3/user/emails", 502);
      try {
        const res = await refusedCallback(cb);
        expect(res.status).toBe(303);
      } finally {
        github.fail(null);
      }
      // with the e-mails readable, the collision asks for the code: no duplicate account either way
      const again = await externalSignIn(h, github, "github", app.redirectUri);
      expect(again.body.verification_required).toBe("email");
    });

    it("slow beyond linkgate's timeout: a clear error within the timeout, not a hung request", async () => {
      google.loginAs(googleUser());
      const s = await start(h, "google", app.redirectUri);
      const cb = await google.followAuthorization(s.body.authorization_url);
      google.slow(60_000);
      try {
        const t = Date.now();
        const res = await refusedCallback(cb);
        // one deadline for the token request; a few hundred ms for linkgate's own work
        expect(Date.now() - t).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
        expect(Date.now() - t).toBeLessThan(TIMEOUT_MS + 1500);
        expect(res.status).toBe(303);
        expect(landing(res).error).toBe("UpstreamUnavailable");
      } finally {
        google.slow(0);
      }
    });

    it("slow but within the timeout: the sign-in succeeds", async () => {
      google.loginAs(googleUser());
      google.slow(TIMEOUT_MS / 4);
      try {
        const r = await externalSignIn(h, google, "google", app.redirectUri);
        expect(r.status, JSON.stringify(r.body)).toBe(200);
      } finally {
        google.slow(0);
      }
    });
  });
});
