// Ceilings tripped by strangers never shut the owners out (docs/security.md, "Known places"):
// an identifier keeps its own budget where it signed in before, by client address or by the
// hosted pages' device cookie, and that budget is finite too; guesses from many addresses stop
// at a cap per identifier; and client addresses are counted by group (IPv6 per /64).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sweepOnce } from "../src/retention/sweep.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

const phone = (i: number) => `+1202555${String(1000 + i).padStart(4, "0")}`;
type Ident = { email: string } | { phone: string };
const to = (i: Ident) => ("email" in i ? i.email : i.phone);

async function suspicious(h: Harness, reason: string): Promise<number> {
  return h.db.prisma.outboxEvent.count({ where: { eventType: "security.suspicious_activity", body: { contains: `"reason":"${reason}"` } } });
}

const start = (h: Harness, from: string, identifier: Ident, headers: Record<string, string> = {}) =>
  h.call("POST", "/auth/otp/start", { body: identifier, from, headers });

/** A whole sign-in from `from`; returns the verify's response (with its Set-Cookie). */
async function signIn(h: Harness, from: string, identifier: Ident, headers: Record<string, string> = {}) {
  const started = await start(h, from, identifier, headers);
  expect(started.status, JSON.stringify(started.body)).toBe(200);
  const otp = await h.mailbox.otp(to(identifier));
  return h.call("POST", "/auth/otp/verify", { body: { state_id: started.body.state_id, otp }, from, headers });
}

/** The device cookie a response set, as a Cookie header. */
function deviceCookieOf(res: { headers: Headers }): { cookie: string; attributes: string } {
  const set = res.headers.get("set-cookie") ?? "";
  const pair = /lg_device=[^;]+/.exec(set)?.[0];
  if (!pair) throw new Error(`no device cookie in ${JSON.stringify(set)}`);
  return { cookie: pair, attributes: set };
}

describe.each(backends)("known places on %s", (backend) => {
  describe("the project's text ceiling, exhausted by strangers", () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(backend, { env: { LINKGATE_LIMIT_SMS_PER_PROJECT_HOURLY: "30", LINKGATE_LIMIT_SENDS_PER_ADDRESS_HOURLY: "10" } });
    });
    afterAll(() => h?.close());

    it("still sends existing phone users their code from an address or a browser they signed in from, and refuses new numbers", async () => {
      const owner = { phone: phone(1) };
      const traveller = { phone: phone(2) };
      const home = "203.0.113.10";
      expect((await signIn(h, home, owner)).status).toBe(200);
      const before = await signIn(h, "203.0.113.20", traveller);
      expect(before.status).toBe(200);
      const device = deviceCookieOf(before);
      expect(device.attributes).toMatch(/HttpOnly/i);
      expect(device.attributes).toMatch(/SameSite=Lax/i);
      expect(device.attributes).not.toMatch(/Secure/i); // the harness serves plain http

      // 18 addresses × 10 starts to fresh numbers: the project's 30 texts go, then 429 for everyone new
      const statuses: number[] = [];
      for (let a = 0; a < 18; a++) {
        for (let i = 0; i < 10; i++) statuses.push((await start(h, `198.51.100.${a + 1}`, { phone: phone(100 + a * 10 + i) })).status);
      }
      expect(statuses.filter((s) => s === 200)).toHaveLength(28); // 2 of the 30 were the users' own codes
      expect(statuses.slice(28).every((s) => s === 429)).toBe(true);
      const fresh = await start(h, "192.0.2.99", { phone: phone(999) });
      expect(fresh.status).toBe(429);
      expect(Number(fresh.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(await suspicious(h, "send_ceiling_per_project")).toBe(1);

      // the owner at home: a code, and a sign-in
      const again = await signIn(h, home, owner);
      expect(again.status).toBe(200);
      expect(again.body.account_id).toMatch(/^acc_/);
      // the traveller at a new address, with the browser they signed in with
      expect((await signIn(h, "192.0.2.150", traveller, { cookie: device.cookie })).status).toBe(200);
      // the same address without that browser is a stranger's
      expect((await start(h, "192.0.2.151", traveller)).status).toBe(429);
      // a cookie that is not a device id is no device, and no error
      expect((await start(h, "192.0.2.152", traveller, { cookie: "lg_device=%00nonsense" })).status).toBe(429);
    });
  });

  describe("a known place's own budget, replayed from many addresses", () => {
    // The device cookie is good from any address: without a budget of their own, codes sent from
    // known places escaped every bound that counts all addresses together, so one sign-in to a
    // number the sender controls bought texts to it from as many addresses as they had.
    const replay = async (h: Harness, identifier: Ident, cookie: string, addresses: number) => {
      const statuses: number[] = [];
      for (let a = 0; a < addresses; a++) statuses.push((await start(h, `198.18.${a}.1`, identifier, { cookie })).status);
      return statuses;
    };

    describe("per identifier", () => {
      let h: Harness;
      beforeAll(async () => {
        h = await startHarness(backend);
      });
      afterAll(() => h?.close());

      it("sends one identifier 10 codes an hour from all its known places together, and leaves other identifiers theirs", async () => {
        const pumped = { phone: phone(3) };
        const device = deviceCookieOf(await signIn(h, "203.0.113.30", pumped));
        const statuses = await replay(h, pumped, device.cookie, 25);
        expect(statuses.filter((s) => s === 200)).toHaveLength(10);
        expect(statuses.slice(10).every((s) => s === 429)).toBe(true);
        // the owner of another number, at their own known place, is not affected
        const neighbour = { phone: phone(4) };
        const theirs = deviceCookieOf(await signIn(h, "203.0.113.31", neighbour));
        expect((await signIn(h, "192.0.2.40", neighbour, { cookie: theirs.cookie })).status).toBe(200);
      });
    });

    describe("per project", () => {
      let h: Harness;
      beforeAll(async () => {
        h = await startHarness(backend, { env: { LINKGATE_LIMIT_SMS_PER_PROJECT_HOURLY: "4" } });
      });
      afterAll(() => h?.close());

      it("stops codes from known places at a second ceiling as large as the project's, and says so once", async () => {
        const numbers = [phone(5), phone(6)].map((p) => ({ phone: p }));
        const cookies = [];
        for (const [i, n] of numbers.entries()) cookies.push(deviceCookieOf(await signIn(h, `203.0.113.${50 + i}`, n)).cookie);
        const statuses = [...(await replay(h, numbers[0], cookies[0], 3)), ...(await replay(h, numbers[1], cookies[1], 3))];
        expect(statuses.filter((s) => s === 200)).toHaveLength(4);
        expect(statuses.slice(4).every((s) => s === 429)).toBe(true);
        expect(await suspicious(h, "send_ceiling_known_places_per_project")).toBe(1);
        // the project's own ceiling is a separate budget: 2 of its 4 texts went to the first sign-ins
        expect((await start(h, "192.0.2.60", { phone: phone(7) })).status).toBe(200);
        expect(await h.db.prisma.outboxEvent.count({ where: { eventType: "security.suspicious_activity" } })).toBe(1);
      });
    });
  });

  describe("wrong codes for one identifier from many addresses", () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(backend);
    });
    afterAll(() => h?.close());

    it("stop at 100 an hour, judged before the code, and the owner at a known address still signs in", async () => {
      const victim = { email: "guessed@example.com" };
      const home = "203.0.113.44";
      expect((await signIn(h, home, victim)).status).toBe(200);

      const outcomes: string[] = [];
      for (let a = 0; a < 20; a++) {
        const from = `198.51.100.${a + 1}`;
        for (let s = 0; s < 3; s++) {
          const st = await start(h, from, victim);
          if (st.status !== 200) {
            outcomes.push(`start:${st.status}`);
            continue;
          }
          const right = await h.mailbox.otp(victim.email);
          for (let i = 0; i < 5; i++) {
            const guess = await h.call("POST", "/auth/otp/verify", { body: { state_id: st.body.state_id, otp: right === "000000" ? "111111" : "000000" }, from });
            outcomes.push(guess.status === 429 ? "429" : guess.body.error);
          }
        }
      }
      expect(outcomes.filter((o) => o === "OTPInvalid")).toHaveLength(100);
      expect(outcomes.filter((o) => o === "429" || o === "start:429").length).toBeGreaterThan(0);
      expect(outcomes.every((o) => ["OTPInvalid", "429", "start:429"].includes(o))).toBe(true);
      expect(await suspicious(h, "wrong_codes_per_identifier")).toBe(1);

      // no new code goes to the identifier from an unknown address either
      const late = await start(h, "192.0.2.77", victim);
      expect(late.status).toBe(429);

      const own = await signIn(h, home, victim);
      expect(own.status).toBe(200);
      expect(own.body.account_id).toMatch(/^acc_/);
    });
  });

  describe("client addresses counted by group", () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(backend, { env: { LINKGATE_LIMIT_SENDS_PER_ADDRESS_HOURLY: "10" } });
    });
    afterAll(() => h?.close());

    it("twenty IPv6 addresses in one /64 share one budget; another /64 has its own", async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) statuses.push((await start(h, `2001:db8:0:64::${(i + 1).toString(16)}`, { email: `v6-${i}@example.com` })).status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(10);
      expect(statuses.slice(10).every((s) => s === 429)).toBe(true);
      expect((await start(h, "2001:db8:0:65::1", { email: "v6-next@example.com" })).status).toBe(200);
    });

    it("an IPv4-mapped IPv6 address counts as the IPv4 address; the full address is what the session shows", async () => {
      const victim = { email: "mapped@example.com" };
      for (let i = 0; i < 3; i++) expect((await start(h, "192.0.2.7", victim)).status).toBe(200);
      for (let i = 0; i < 2; i++) expect((await start(h, "::ffff:c000:207", victim)).status).toBe(200);
      expect((await start(h, "::ffff:c000:207", victim)).status).toBe(429);

      const user = await signIn(h, "2001:db8:0:66::abcd", { email: "shown@example.com" });
      const session = await h.db.prisma.session.findFirstOrThrow({ where: { accountId: user.body.account_id } });
      expect(session.clientAddress).toBe("2001:db8:0:66::abcd");
    });
  });

  describe("the device cookie", () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(backend, { env: { LINKGATE_ISSUER: "https://id.example.test" } });
    });
    afterAll(() => h?.close());
    const gql = (query: string, variables: object, from: string, headers: Record<string, string> = {}) =>
      h.call("POST", "/graphql", { body: { query, variables }, from, headers: { "x-api-key": h.publishableKey, ...headers } });

    it("is set by the hosted pages' GraphQL sign-in (Secure behind an https issuer), sent back, and never set by a failure", async () => {
      const who = { email: "pages-user@example.com" };
      const started = await gql(`mutation($e: String) { startSignIn(email: $e) { ... on OtpChallenge { stateId } } }`, { e: who.email }, "203.0.113.70");
      const stateId = started.body.data.startSignIn.stateId;
      const wrong = await gql(`mutation($s: String!, $o: String!) { completeSignIn(stateId: $s, otp: $o) { __typename } }`, { s: stateId, o: "000000" }, "203.0.113.70");
      expect(wrong.headers.get("set-cookie")).toBeNull();
      const otp = await h.mailbox.otp(who.email);
      const done = await gql(`mutation($s: String!, $o: String!) { completeSignIn(stateId: $s, otp: $o) { __typename } }`, { s: stateId, o: otp }, "203.0.113.70");
      expect(done.body.data.completeSignIn.__typename).toBe("SignInTokens");
      const device = deviceCookieOf(done);
      expect(device.attributes).toMatch(/HttpOnly/i);
      expect(device.attributes).toMatch(/SameSite=Lax/i);
      expect(device.attributes).toMatch(/Secure/i);
      // the next sign-in from that browser keeps its device
      const again = await signIn(h, "192.0.2.71", who, { cookie: device.cookie });
      expect(deviceCookieOf(again).cookie).toBe(device.cookie);
    });
  });

  describe("retention", () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(backend);
    });
    afterAll(() => h?.close());

    it("forgets a known place 30 days after its last sign-in there", async () => {
      expect((await signIn(h, "203.0.113.60", { email: "old-place@example.com" })).status).toBe(200);
      expect((await signIn(h, "203.0.113.61", { email: "recent-place@example.com" })).status).toBe(200);
      const rows = await h.db.prisma.knownSignIn.findMany({ orderBy: { lastAt: "asc" } });
      expect(rows).toHaveLength(4); // an address and a device each
      await h.db.prisma.knownSignIn.updateMany({ where: { id: { in: rows.slice(0, 2).map((r) => r.id) } }, data: { lastAt: new Date(Date.now() - 31 * 86400_000) } });
      const report = await sweepOnce(h.db, { eventsDays: 30, deliveryLogDays: 30 });
      expect(report.deleted.known_sign_ins).toBe(2);
      expect((await h.db.prisma.knownSignIn.findMany()).map((r) => r.id).sort()).toEqual(rows.slice(2).map((r) => r.id).sort());
    });
  });
});
