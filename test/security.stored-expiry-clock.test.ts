// Stored expiries are written and checked on the database's clock (docs/operations.md, "Clocks"): a
// passkey challenge, an external sign-in's flow and the e-mail proof it asks for, a session's
// lifetime and its sign-in time, a security notice's first send, the OpenID provider's stored
// codes, a webhook rotation's end. Each is written by one gateway and read by whichever serves the
// next request; on their own clocks a gateway running ahead wrote lifetimes that much longer, and
// one running behind took what the database said had expired. A passkey or external sign-in also
// dated its session on the gateway's clock, recent that much longer on every gateway (the code
// sign-in already used the database's).
//
// A gateway's clock is moved with vitest's fake Date (only Date: timers run as usual). That needs
// a database with a clock of its own, Postgres; PGlite runs in the gateway's process and reads
// the same Date, so the two cannot differ there.
import * as client from "openid-client";
import { decodeJwt } from "jose";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { serverUrl } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { bearer, databaseNow, gatewayClock } from "./support/clock.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { PASSKEY_ORIGIN, passkeyAssertion, registerPasskey, signInWithPasskey } from "./support/passkeys.ts";
import { Agent, authorizationUrl, authorize, discover, registerClient } from "./support/oidc.ts";
import { authorize as authorizeExternal, callback, complete, externalSignIn, start, startExternalWorld, type ExternalWorld } from "./support/upstream-linkgate.ts";
import type { GithubUser } from "./support/upstream.ts";

const SKEW_MS = 2 * 60_000;
let seq = 0;
const githubUser = (): GithubUser => {
  const n = ++seq;
  return { id: 700_000 + n, login: `clock${n}`, name: null, email: null, emails: [{ email: `clock${n}@example.com`, primary: true, verified: true, visibility: "private" }] };
};
const RECENT_SECONDS = 600;



describe.skipIf(!serverUrl)("passkeys and sessions on a gateway whose clock is off the database's (postgres)", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness("postgres", { env: { LINKGATE_RECENT_AUTH_SECONDS: String(RECENT_SECONDS) } });
  });
  afterAll(() => h?.close());
  afterEach(() => {
    vi.useRealTimers();
  });

  it("a passkey sign-in on a gateway running ahead dates its challenge and its session by the database", async () => {
    const user = await h.signIn({ email: "pk-ahead@example.com" });
    const auth = new SoftAuthenticator(PASSKEY_ORIGIN);
    await registerPasskey(h, user.token, auth);
    gatewayClock(SKEW_MS);

    const options = await h.gql(`mutation { startPasskeySignIn }`, {}, { "x-api-key": h.publishableKey });
    const challenge = await h.db.prisma.webauthnChallenge.findUniqueOrThrow({ where: { challenge: options.body.data.startPasskeySignIn.challenge } });
    expect(challenge.expiresAt.getTime()).toBeLessThanOrEqual((await databaseNow(h)) + 5 * 60_000);

    const token = await signInWithPasskey(h, auth);
    const session = await h.db.prisma.session.findUniqueOrThrow({ where: { id: decodeJwt(token).sid as string } });
    const now = await databaseNow(h);
    expect(session.authTime.getTime()).toBeLessThanOrEqual(now);
    expect(session.createdAt.getTime()).toBeLessThanOrEqual(now);
    expect(session.expiresAt.getTime()).toBeLessThanOrEqual(now + 30 * 24 * 3600_000);

    // 30 s past the recent window by the database, the passkey sign-in is no longer recent
    await h.db.prisma.$executeRaw`UPDATE sessions SET auth_time = auth_time - make_interval(secs => ${RECENT_SECONDS + 30}) WHERE id = ${session.id}`;
    const refused = await h.call("POST", "/users/link/request", { body: { email: "pk-intruder@evil.example" }, headers: bearer(token) });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toBe("ReauthenticationRequired");
  });

  it("a passkey challenge the database says has expired is refused on a gateway running behind", async () => {
    const user = await h.signIn({ email: "pk-behind@example.com" });
    const auth = new SoftAuthenticator(PASSKEY_ORIGIN);
    await registerPasskey(h, user.token, auth);
    gatewayClock(-SKEW_MS);

    const response = (await passkeyAssertion(h, auth)) as { response: { clientDataJSON: string } };
    const { challenge } = JSON.parse(Buffer.from(response.response.clientDataJSON, "base64url").toString());
    await h.db.prisma.$executeRaw`UPDATE webauthn_challenges SET expires_at = (now() - interval '30 seconds') AT TIME ZONE 'UTC' WHERE challenge = ${challenge}`;
    const r = await h.gql(
      `mutation($r: JSON!) { finishPasskeySignIn(response: $r) { __typename ... on Error { message } } }`,
      { r: response },
      { "x-api-key": h.publishableKey },
    );
    expect(r.body.data.finishPasskeySignIn).toEqual({ __typename: "PasskeyInvalid", message: "that passkey challenge is unknown, used or expired; start again" });
  });

  it("a security notice queued on a gateway running ahead is sent at once, not when that clock says", async () => {
    const user = await h.signIn({ email: "notice-ahead@example.com" });
    gatewayClock(SKEW_MS);
    await registerPasskey(h, user.token, new SoftAuthenticator(PASSKEY_ORIGIN));
    const notices = await h.db.prisma.notice.findMany({ where: { value: "notice-ahead@example.com" } });
    expect(notices.length).toBeGreaterThan(0);
    const now = await databaseNow(h);
    for (const n of notices) expect(n.createdAt.getTime()).toBeLessThanOrEqual(now);
    // due by the database: the sender the change kicked takes it now, not 2 minutes later
    const told = () => h.mailbox.messages.find((m) => m.to === "notice-ahead@example.com" && /passkey/i.test(m.text));
    for (let i = 0; i < 100 && !told(); i++) await new Promise((r) => setTimeout(r, 50));
    expect(told()).toBeDefined();
  });

  it("a webhook secret rotated on a gateway running ahead keeps the old secret 7 days by the database, not 7 days and 2 minutes", async () => {
    const created = await h.gql(`mutation { createWebhook(input: { url: "https://127.0.0.1:9/hook", events: ["user.created"] }) { ... on CreateWebhookPayload { webhook { id } } } }`);
    const id = created.body.data.createWebhook.webhook.id;
    gatewayClock(SKEW_MS);
    const rotated = await h.call("POST", "/api/v1/webhooks/rotate-secret", { body: { webhook_id: id }, headers: { authorization: `Bearer ${h.apiKey}` } });
    expect(rotated.status).toBe(200);
    const ends = Date.parse(rotated.body.transition_ends_at);
    expect(ends).toBeLessThanOrEqual((await databaseNow(h)) + 7 * 24 * 3600_000);
    const row = await h.db.prisma.webhook.findUniqueOrThrow({ where: { id } });
    expect(row.previousSecretExpiresAt!.getTime()).toBe(ends);
  });
});

describe.skipIf(!serverUrl)("external sign-in flows on a gateway whose clock is off the database's (postgres)", () => {
  let world: ExternalWorld;
  const APP = "https://app.example/after-sign-in";
  beforeAll(async () => {
    world = await startExternalWorld("postgres", APP);
  });
  afterAll(() => world?.close());
  afterEach(() => {
    vi.useRealTimers();
  });

  it("a flow started on a gateway running ahead ends 10 minutes after, by the database", async () => {
    const { h } = world;
    gatewayClock(SKEW_MS);
    const s = await start(h, "github", APP);
    expect(s.status).toBe(200);
    const flow = await h.db.prisma.externalFlow.findUniqueOrThrow({ where: { id: s.body.state_id } });
    expect(flow.expiresAt.getTime()).toBeLessThanOrEqual((await databaseNow(h)) + 10 * 60_000);
  });

  it("a flow the database says has expired is refused at the callback and at completion on a gateway running behind", async () => {
    const { h, github } = world;
    gatewayClock(-SKEW_MS);
    const expire = (id: string) => h.db.prisma.$executeRaw`UPDATE external_flows SET expires_at = (now() - interval '30 seconds') AT TIME ZONE 'UTC' WHERE id = ${id}`;

    github.loginAs(githubUser());
    const s = await start(h, "github", APP);
    const back = await github.followAuthorization(s.body.authorization_url);
    await expire(s.body.state_id);
    expect((await callback(h, back)).status).toBe(400);

    github.loginAs(githubUser());
    const { started, code } = await authorizeExternal(h, github, "github", APP);
    await expire(started.state_id);
    const late = await complete(h, started.state_id, code);
    expect(late.status).toBe(400);
    expect(late.body.error).toBe("OTPInvalid");
  });

  it("an e-mail proof the database says has expired takes no passkey on a gateway running behind", async () => {
    const { h, google } = world;
    const holder = await h.signIn({ email: "clock-holder@example.com" });
    const auth = new SoftAuthenticator("http://linkgate.test");
    await registerPasskey(h, holder.token, auth);
    gatewayClock(-SKEW_MS);

    google.loginAs({ sub: "clock-claims-holder", email: "clock-holder@example.com", email_verified: true });
    const asked = await externalSignIn(h, google, "google", APP);
    expect(asked.body.verification_required).toBe("email");
    await h.db.prisma.$executeRaw`UPDATE otp_states SET expires_at = (now() - interval '30 seconds') AT TIME ZONE 'UTC' WHERE id = ${asked.body.state_id}`;
    const late = await h.call("POST", "/auth/external/confirm/passkey", { body: { state_id: asked.body.state_id, response: await passkeyAssertion(h, auth) } });
    expect(late.status).toBe(400);
    expect(late.body.error).toBe("OTPInvalid");
    expect(await h.db.prisma.identifier.count({ where: { accountId: holder.accountId, kind: "external" } })).toBe(0);
  });
});

describe.skipIf(!serverUrl)("the OpenID provider's stored codes on a gateway whose clock is off the database's (postgres)", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness("postgres", { env: { LINKGATE_ISSUER: "http://linkgate.test" } });
  });
  afterAll(() => h?.close());
  afterEach(() => {
    vi.useRealTimers();
  });

  const authorizationCodes = () => h.db.prisma.oidcPayload.findMany({ where: { kind: "AuthorizationCode", consumedAt: null } });

  it("a code issued on a gateway running ahead is stored to expire 60 s after, by the database", async () => {
    const app = await registerClient(h, { firstParty: true });
    const cfg = await discover(h, app);
    gatewayClock(SKEW_MS);
    const before = new Set((await authorizationCodes()).map((c) => c.id));
    await authorize(h, new Agent(h), await authorizationUrl(cfg, app), "oidc-ahead@example.com");
    const [code] = (await authorizationCodes()).filter((c) => !before.has(c.id));
    expect(code.expiresAt!.getTime()).toBeLessThanOrEqual((await databaseNow(h)) + 60_000);
  });

  it("a code the database says has expired is refused on a gateway running behind, whose own clock oidc-provider still reads", async () => {
    const app = await registerClient(h, { firstParty: true });
    const cfg = await discover(h, app);
    gatewayClock(-SKEW_MS);
    const auth = await authorizationUrl(cfg, app);
    const before = new Set((await authorizationCodes()).map((c) => c.id));
    const back = await authorize(h, new Agent(h), auth, "oidc-behind@example.com");
    const [code] = (await authorizationCodes()).filter((c) => !before.has(c.id));
    await h.db.prisma.$executeRaw`UPDATE oidc_payloads SET expires_at = (now() - interval '30 seconds') AT TIME ZONE 'UTC' WHERE id = ${code.id}`;
    await expect(client.authorizationCodeGrant(cfg, back, { pkceCodeVerifier: auth.verifier, expectedState: auth.state, expectedNonce: auth.nonce })).rejects.toMatchObject({
      error: "invalid_grant",
    });
  });
});
