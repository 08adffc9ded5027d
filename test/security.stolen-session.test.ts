// A stolen access token must not be enough to take an account over for good (issue 18): the
// "persistence through linking" attack, end to end, against recent authentication, notices
// and session management. A session goes stale the way time would make it: its last
// authentication is moved back past the window in the database. The window itself is long, so a
// session that just signed in or re-authenticated stays fresh however slow the machine is (with a
// window of 2 s and real waits, a loaded machine let fresh sessions go stale mid-test).
import http from "node:http";
import type { AddressInfo } from "node:net";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { until } from "./support/receiver.ts";

const RECENT_SECONDS = 120;

/** The body of a raw e-mail as a person reads it (nodemailer sends non-ASCII text quoted-printable). */
function quotedPrintable(raw: string): string {
  const body = raw.replace(/=\r?\n/g, "");
  return Buffer.from(body.replace(/=([0-9A-F]{2})/g, (_, hex) => String.fromCharCode(parseInt(hex, 16))), "latin1").toString("utf8");
}

// The backends run side by side, each on its own harness; the steps of one backend run in order.
describe.concurrent.each(backends)("a stolen session on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_RECENT_AUTH_SECONDS: String(RECENT_SECONDS) } });
  });
  afterAll(() => h?.close());

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const inbox = (to: string) => h.mailbox.messages.filter((m) => m.to === to);
  /** The token's session last authenticated a second more than the window ago, as if that much time had passed. */
  const staleSession = (token: string) =>
    h.db.prisma.$executeRaw`UPDATE sessions SET auth_time = auth_time - make_interval(secs => ${RECENT_SECONDS + 1}) WHERE id = ${decodeJwt(token).sid as string}`;

  it.sequential("cannot attach an identifier for good: refused past the window, notices on attach, the owner cleans up", async () => {
    const owner = await h.signIn({ email: "victim@example.com" });
    const stolen = owner.token; // the attacker holds a copy of the owner's token
    await staleSession(stolen);

    const refused = await h.call("POST", "/users/link/request", { body: { email: "attacker@evil.example" }, headers: bearer(stolen) });
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({ error: "ReauthenticationRequired", message: expect.any(String) });
    expect(inbox("attacker@evil.example")).toEqual([]);

    // The owner re-authenticates this very session: same sid, a new auth_time.
    const start = await h.call("POST", "/auth/reauthenticate/start", { body: { email: "victim@example.com" }, headers: bearer(stolen) });
    expect(start.status).toBe(200);
    const again = await h.call("POST", "/auth/reauthenticate/verify", {
      body: { state_id: start.body.state_id, otp: await h.mailbox.otp("victim@example.com") },
      headers: bearer(stolen),
    });
    expect(again.status).toBe(200);
    expect(decodeJwt(again.body.access_token).sid).toBe(decodeJwt(stolen).sid);
    // a new auth_time: now, not the session's last authentication (moved back past the window)
    expect(decodeJwt(again.body.access_token).auth_time as number).toBeGreaterThan((decodeJwt(stolen).auth_time as number) - RECENT_SECONDS);

    // Within the window the same session can link: the attacker attaches their address…
    const req = await h.call("POST", "/users/link/request", { body: { email: "attacker@evil.example" }, headers: bearer(stolen) });
    expect(req.status).toBe(200);
    const verify = await h.call("POST", "/users/link/verify", {
      body: { state_id: req.body.state_id, otp: await h.mailbox.otp("attacker@evil.example") },
      headers: bearer(stolen),
    });
    expect(verify.body.outcome).toBe("attached");

    // …and the owner's existing address is told, without the new address in full.
    const notices = await until(() => inbox("victim@example.com").filter((m) => /was added to your account/.test(m.subject ?? "")), (n) => n.length > 0);
    expect(notices).toHaveLength(1);
    const text = quotedPrintable(notices[0].text);
    expect(text).toContain("a•••@evil.example");
    expect(text).not.toContain("attacker");
    expect(text).toMatch(/When: \d{4}-\d\d-\d\d \d\d:\d\d UTC/);
    expect(text).toMatch(/end your other sessions/);
    expect(inbox("attacker@evil.example").some((m) => /was added/.test(m.subject ?? ""))).toBe(false);

    // The owner signs in on their own device, ends every other session, removes the address.
    const fresh = await h.signIn({ email: "victim@example.com" });
    const ended = await h.gql(`mutation { endOtherSessions { ... on EndSessionsPayload { ended } } }`, {}, bearer(fresh.token));
    expect(ended.body.data.endOtherSessions.ended).toBe(1);
    const removed = await h.call("POST", "/users/link/remove", { body: { email: "attacker@evil.example" }, headers: bearer(fresh.token) });
    expect(removed.status).toBe(200);

    // The stolen token fails on its very next request; the attacker's address is a stranger now.
    expect((await h.call("GET", "/oauth/userinfo", { headers: bearer(stolen) })).status).toBe(401);
    expect((await h.call("GET", "/oauth/userinfo", { headers: bearer(again.body.access_token) })).status).toBe(401);
    const attacker = await h.signIn({ email: "attacker@evil.example" });
    expect(attacker.accountId).not.toBe(owner.accountId);
  });

  it.sequential("re-authentication with an identifier that is not the account's: 4xx, no code sent, nothing changed", async () => {
    const user = await h.signIn({ email: "reauth-own@example.com" });
    await h.signIn({ email: "someone-else@example.com" });
    const before = await h.db.prisma.otpState.count();
    for (const body of [{ email: "someone-else@example.com" }, { email: "nobody@example.com" }, { phone: "+12025550177" }]) {
      const r = await h.call("POST", "/auth/reauthenticate/start", { body, headers: bearer(user.token) });
      expect(r.status).toBe(409);
      expect(r.body.error).toBe("IdentifierNotLinked");
    }
    expect(inbox("nobody@example.com")).toEqual([]);
    expect(h.mailbox.messages.filter((m) => m.to === "someone-else@example.com" && /Confirm/.test(m.subject ?? ""))).toEqual([]);
    expect(await h.db.prisma.otpState.count()).toBe(before);
  });

  it.sequential("a sign-in on another device does not refresh this session's recency; re-authenticating it does", async () => {
    const a = await h.signIn({ email: "two-devices@example.com" });
    await staleSession(a.token);
    const b = await h.signIn({ email: "two-devices@example.com" });
    expect(decodeJwt(b.token).sid).not.toBe(decodeJwt(a.token).sid);
    const stale = await h.gql(`mutation { requestLink(email: "x-two@example.com") { __typename ... on Error { message } } }`, {}, bearer(a.token));
    expect(stale.body.data.requestLink.__typename).toBe("ReauthenticationRequired");
    const ok = await h.gql(`mutation { requestLink(email: "x-two@example.com") { __typename } }`, {}, bearer(b.token));
    expect(ok.body.data.requestLink.__typename).toBe("OtpChallenge");

    const st = await h.gql(`mutation { startReauthentication(email: "two-devices@example.com") { ... on OtpChallenge { stateId } } }`, {}, bearer(a.token));
    const otp = await h.mailbox.otp("two-devices@example.com");
    const done = await h.gql(
      `mutation($s: String!, $o: String!) { completeReauthentication(stateId: $s, otp: $o) { ... on SignInTokens { accessToken } } }`,
      { s: st.body.data.startReauthentication.stateId, o: otp },
      bearer(a.token),
    );
    const token = done.body.data.completeReauthentication.accessToken;
    expect(decodeJwt(token).sid).toBe(decodeJwt(a.token).sid);
    const now = await h.gql(`mutation { requestLink(email: "x-two2@example.com") { __typename } }`, {}, bearer(a.token));
    expect(now.body.data.requestLink.__typename).toBe("OtpChallenge");
  });

  it.sequential("every sensitive operation answers ReauthenticationRequired past the window; a passkey re-authenticates too", async () => {
    const user = await h.signIn({ email: "sensitive@example.com" });
    const auth = new SoftAuthenticator("http://localhost:4000");
    const opts = await h.gql(`mutation { startPasskeyRegistration { ... on PasskeyCreationOptions { options } } }`, {}, bearer(user.token));
    const reg = await h.gql(`mutation($r: JSON!) { finishPasskeyRegistration(response: $r) { ... on Passkey { id } } }`, { r: auth.create(opts.body.data.startPasskeyRegistration.options) }, bearer(user.token));
    const passkeyId = reg.body.data.finishPasskeyRegistration.id;
    await staleSession(user.token);

    const ops: Array<[string, string]> = [
      ["requestLink", `mutation { requestLink(email: "s2@example.com") { __typename } }`],
      ["removeLink", `mutation { removeLink(email: "sensitive@example.com") { __typename } }`],
      ["unmerge", `mutation { unmerge { __typename } }`],
      ["startPasskeyRegistration", `mutation { startPasskeyRegistration { __typename } }`],
      ["removePasskey", `mutation { removePasskey(id: "${passkeyId}") { __typename } }`],
      ["deleteAccount", `mutation { deleteAccount { __typename } }`],
    ];
    for (const [name, doc] of ops) {
      const r = await h.gql(doc, {}, bearer(user.token));
      expect(r.body.data?.[name]?.__typename, `${name}: ${JSON.stringify(r.body)}`).toBe("ReauthenticationRequired");
    }
    expect(await h.db.prisma.passkey.count({ where: { id: passkeyId } })).toBe(1);

    // touched but not verified (no PIN, no biometrics): not a re-authentication
    const unverifiedOpts = await h.gql(`mutation { startPasskeySignIn }`);
    const unverified = await h.gql(
      `mutation($r: JSON!) { reauthenticateWithPasskey(response: $r) { __typename } }`,
      { r: auth.get(unverifiedOpts.body.data.startPasskeySignIn, undefined, { userVerified: false }) },
      bearer(user.token),
    );
    expect(unverified.body.data.reauthenticateWithPasskey.__typename).toBe("PasskeyInvalid");
    const stillStale = await h.gql(`mutation { removePasskey(id: "${passkeyId}") { __typename } }`, {}, bearer(user.token));
    expect(stillStale.body.data.removePasskey.__typename).toBe("ReauthenticationRequired");

    const signOpts = await h.gql(`mutation { startPasskeySignIn }`);
    const re = await h.gql(
      `mutation($r: JSON!) { reauthenticateWithPasskey(response: $r) { __typename ... on SignInTokens { accessToken } } }`,
      { r: auth.get(signOpts.body.data.startPasskeySignIn) },
      bearer(user.token),
    );
    expect(re.body.data.reauthenticateWithPasskey.__typename).toBe("SignInTokens");
    expect(decodeJwt(re.body.data.reauthenticateWithPasskey.accessToken).sid).toBe(decodeJwt(user.token).sid);
    const removed = await h.gql(`mutation { removePasskey(id: "${passkeyId}") { __typename } }`, {}, bearer(user.token));
    expect(removed.body.data.removePasskey.__typename).toBe("RemovePasskeyPayload");
  });

  it.sequential("repeated refusals from one session emit one security event per window", async () => {
    const user = await h.signIn({ email: "persistent@example.com" });
    await staleSession(user.token);
    for (let i = 0; i < 9; i++) {
      expect((await h.call("POST", "/users/link/request", { body: { email: `try${i}@evil.example` }, headers: bearer(user.token) })).status).toBe(403);
    }
    const events = await h.db.prisma.outboxEvent.findMany({
      where: { eventType: "security.suspicious_activity", body: { contains: decodeJwt(user.token).sid as string } },
    });
    expect(events).toHaveLength(1);
    expect(JSON.parse(events[0].body).data).toMatchObject({ user_id: user.accountId, session_id: decodeJwt(user.token).sid });
  });

  it.sequential("a session's last use is its first request of each minute", async () => {
    const user = await h.signIn({ email: "regular@example.com" });
    const sid = decodeJwt(user.token).sid as string;
    const lastUse = async () => (await h.db.prisma.session.findUniqueOrThrow({ where: { id: sid } })).lastUsedAt;
    const request = async () => expect((await h.gql(`{ viewer { id } }`, {}, bearer(user.token))).body.errors).toBeUndefined();
    /** Moves the session's last use back, as if that many seconds had passed since it. */
    const ago = (seconds: number) => h.db.prisma.$executeRaw`UPDATE sessions SET last_used_at = now() - make_interval(secs => ${seconds}) WHERE id = ${sid}`;

    await request();
    const first = await lastUse();
    expect(first).not.toBeNull();
    await ago(30);
    const within = await lastUse();
    await request();
    expect(await lastUse()).toEqual(within); // less than a minute since: not touched again
    await ago(61);
    const stale = await lastUse();
    await request();
    expect((await lastUse())!.getTime()).toBeGreaterThan(stale!.getTime() + 60_000);
  });

  it.sequential("sessions are listed with where and when, and ending one stops its tokens at once", async () => {
    const one = await h.signIn({ email: "lister@example.com" });
    const two = await h.signIn({ email: "lister@example.com" });
    const list = await h.gql(`{ viewer { sessions { edges { node { id current clientAddress createdAt lastUsedAt } } } } }`, {}, bearer(two.token));
    const nodes = list.body.data.viewer.sessions.edges.map((e: any) => e.node);
    expect(nodes).toHaveLength(2);
    expect(nodes.find((n: any) => n.current).id).toBe(decodeJwt(two.token).sid);
    const other = nodes.find((n: any) => !n.current);
    expect(other.id).toBe(decodeJwt(one.token).sid);
    const ended = await h.gql(`mutation($id: ID!) { endSession(id: $id) { __typename } }`, { id: other.id }, bearer(two.token));
    expect(ended.body.data.endSession.__typename).toBe("EndSessionsPayload");
    expect((await h.call("GET", "/oauth/userinfo", { headers: bearer(one.token) })).status).toBe(401);
    const stranger = await h.signIn({ email: "stranger@example.com" });
    const notMine = await h.gql(`mutation($id: ID!) { endSession(id: $id) { __typename } }`, { id: decodeJwt(two.token).sid }, bearer(stranger.token));
    expect(notMine.body.data.endSession.__typename).toBe("NotFound");
    expect((await h.call("GET", "/oauth/userinfo", { headers: bearer(two.token) })).status).toBe(200);
  });

  // An expired session is not one of the account's live sessions (the list leaves it out, its
  // tokens are refused): ending it answered `ended: 1`, and endOtherSessions counted it
  it.sequential("an expired session is not found by endSession and not counted by endOtherSessions", async () => {
    const current = await h.signIn({ email: "expiring@example.com" });
    const expired = await h.signIn({ email: "expiring@example.com" });
    const live = await h.signIn({ email: "expiring@example.com" });
    const expiredSid = decodeJwt(expired.token).sid as string;
    await h.db.prisma.$executeRaw`UPDATE sessions SET expires_at = now() - interval '1 second' WHERE id = ${expiredSid}`;
    const listed = await h.gql(`{ viewer { sessions { edges { node { id } } } } }`, {}, bearer(current.token));
    expect(listed.body.data.viewer.sessions.edges.map((e: any) => e.node.id)).not.toContain(expiredSid);

    const end = await h.gql(`mutation($id: ID!) { endSession(id: $id) { __typename } }`, { id: expiredSid }, bearer(current.token));
    expect(end.body.data.endSession.__typename).toBe("NotFound");
    const others = await h.gql(`mutation { endOtherSessions { ... on EndSessionsPayload { ended } } }`, {}, bearer(current.token));
    expect(others.body.data.endOtherSessions.ended).toBe(1);
    expect((await h.call("GET", "/oauth/userinfo", { headers: bearer(live.token) })).status).toBe(401);
  });

  it.sequential("a stale token cannot sign the owner out elsewhere, rename the account or cut off an app; it can still end its own session", async () => {
    const owner = await h.signIn({ email: "stale-owner@example.com" });
    const stolen = await h.signIn({ email: "stale-owner@example.com" });
    await staleSession(stolen.token);
    const ops: Array<[string, string, Record<string, unknown>]> = [
      ["endOtherSessions", `mutation { endOtherSessions { __typename } }`, {}],
      ["endSession", `mutation($id: ID!) { endSession(id: $id) { __typename } }`, { id: decodeJwt(owner.token).sid }],
      ["updateProfile", `mutation { updateProfile(name: "Call +1 900 555 0100") { __typename } }`, {}],
      ["revokeOAuthConsent", `mutation { revokeOAuthConsent(clientId: "lgc_any") { __typename } }`, {}],
    ];
    for (const [name, doc, variables] of ops) {
      const r = await h.gql(doc, variables, bearer(stolen.token));
      expect(r.body.data?.[name]?.__typename, `${name}: ${JSON.stringify(r.body)}`).toBe("ReauthenticationRequired");
    }
    expect((await h.call("GET", "/oauth/userinfo", { headers: bearer(owner.token) })).status).toBe(200);
    expect((await h.db.prisma.account.findUniqueOrThrow({ where: { id: owner.accountId } })).name).toBeNull();

    // signing out never needs a fresh sign-in
    const self = await h.gql(`mutation($id: ID!) { endSession(id: $id) { __typename } }`, { id: decodeJwt(stolen.token).sid }, bearer(stolen.token));
    expect(self.body.data.endSession.__typename).toBe("EndSessionsPayload");
    expect((await h.call("GET", "/oauth/userinfo", { headers: bearer(stolen.token) })).status).toBe(401);
    expect((await h.call("GET", "/oauth/userinfo", { headers: bearer(owner.token) })).status).toBe(200);
  });
});

describe.each(backends)("notices that fail to send on %s", (backend) => {
  let h: Harness;
  let sms: http.Server;
  let failing = false;
  const texts: Array<{ to: string; body: string }> = [];
  beforeAll(async () => {
    // A texting provider that can be made to fail, on loopback.
    sms = http.createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        if (failing) return void res.writeHead(503).end();
        texts.push(JSON.parse(body));
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => sms.listen(0, "127.0.0.1", r));
    h = await startHarness(backend, {
      env: { SMS_WEBHOOK_URL: `http://127.0.0.1:${(sms.address() as AddressInfo).port}/sms`, LINKGATE_NOTICE_RETRY_SCHEDULE_MS: "300,300,300" },
    });
  });
  afterAll(async () => {
    await h?.close();
    await new Promise((r) => sms.close(r));
  });

  it("never block the change and are retried until they go out", async () => {
    const phone = "+12025550166";
    const start = await h.call("POST", "/auth/otp/start", { body: { phone } });
    const code = /Your code is (\d{6})/.exec(texts.find((t) => t.to === phone)!.body)![1];
    const verify = await h.call("POST", "/auth/otp/verify", { body: { state_id: start.body.state_id, otp: code } });
    const bearer = { authorization: `Bearer ${verify.body.access_token}` };

    failing = true;
    const req = await h.call("POST", "/users/link/request", { body: { email: "added-while-down@example.com" }, headers: bearer });
    const linked = await h.call("POST", "/users/link/verify", {
      body: { state_id: req.body.state_id, otp: await h.mailbox.otp("added-while-down@example.com") },
      headers: bearer,
    });
    expect(linked.status).toBe(200);
    const pending = await until(() => h.db.prisma.notice.findFirst({ where: { value: phone } }), (n) => !!n?.lastError);
    expect(pending, JSON.stringify(pending)).toMatchObject({ status: "pending", lastError: expect.stringMatching(/503/) });

    failing = false;
    const sent = await until(() => h.db.prisma.notice.findFirst({ where: { value: phone } }), (n) => n?.status === "sent");
    expect(sent?.status).toBe("sent");
    const notice = texts.find((t) => t.to === phone && /was added to your account/.test(t.body));
    expect(notice?.body).toContain("a***@example.com");
  });
});
