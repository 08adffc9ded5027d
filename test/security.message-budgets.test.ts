// Every message the service sends counts (docs/security.md, "Message budgets"): security notices
// are bounded per destination and per account, count against the project's hourly text
// ceiling like codes do, and are gathered into one message per destination when a budget holds
// them; and nothing a user typed goes into a notice sent under the operator's name.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import "../src/auth/notices.ts";
import "../src/rate-limit.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { describeRowTypes } from "./support/sql-types.ts";
import { until } from "./support/receiver.ts";

const ORIGIN = "http://localhost:4000"; // the harness's default issuer: passkeys are for "localhost"
const phone = (i: number) => `+1202555${String(2000 + i).padStart(4, "0")}`;

type User = { token: string; accountId: string };

describeRowTypes("message budgets", ["state_failures", "postpone_notices", "count_messages"]);

describe.each(backends)("message budgets on %s", (backend) => {
  let h: Harness;
  const headers = (u: User) => ({ authorization: `Bearer ${u.token}`, "x-api-key": h.publishableKey });
  const texts = (to: string) => h.mailbox.messages.filter((m) => m.to === to).map((m) => m.text);

  async function attach(u: User, p: string) {
    const req = await h.call("POST", "/users/link/request", { body: { phone: p }, headers: headers(u) });
    expect(req.status, JSON.stringify(req.body)).toBe(200);
    const otp = await h.mailbox.otp(p);
    const done = await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp }, headers: headers(u) });
    expect(done.body.outcome).toBe("attached");
  }
  async function addPasskey(u: User, auth: SoftAuthenticator, name: string): Promise<string> {
    const opts = await h.call("POST", "/auth/passkey/registration/options", { headers: headers(u) });
    const created = await h.call("POST", "/auth/passkey/registration/verify", { body: { response: auth.create(opts.body), name }, headers: headers(u) });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    return created.body.passkey.id;
  }
  async function removePasskey(u: User, id: string) {
    expect((await h.call("POST", "/auth/passkey/remove", { body: { id }, headers: headers(u) })).status).toBe(200);
  }
  /** Every notice is either sent or held by a budget (none claimed or due): the sender is done for now. */
  const settled = () =>
    until(
      () => h.db.prisma.notice.count({ where: { status: "pending", OR: [{ attempts: { gt: 0 } }, { nextAttemptAt: { lte: new Date() } }] } }),
      (n) => n === 0,
    );

  describe("an account with ten phones cycling passkeys", () => {
    beforeAll(async () => {
      h = await startHarness(backend);
    });
    afterAll(() => h?.close());

    it("texts the phones at most twenty notices an hour, then one message each gathering the rest", async () => {
      const u = await h.signIn({ email: "pumper@example.com" });
      const phones = Array.from({ length: 10 }, (_, i) => phone(i));
      for (const p of phones) await attach(u, p);
      const auth = new SoftAuthenticator(ORIGIN);
      for (let i = 0; i < 20; i++) await removePasskey(u, await addPasskey(u, auth, `Key ${i}`));
      await settled();

      // 20 cycles × 10 phones were 400 texts (plus the attach notices); now the account's 20 an hour
      expect(phones.flatMap(texts).length).toBeLessThanOrEqual(20);
      for (const p of phones) expect(texts(p).length, p).toBeLessThanOrEqual(5);
      const held = await h.db.prisma.notice.findMany({ where: { status: "pending" } });
      expect(held.length).toBeGreaterThan(0);
      expect(held.every((n) => n.nextAttemptAt.getTime() > Date.now())).toBe(true);

      // ten minutes later (the windows and the held notices aged by SQL), each phone gets one message
      const before = new Map(phones.map((p) => [p, texts(p).length]));
      await h.db.prisma.$executeRawUnsafe(`UPDATE rate_limits SET window_start = window_start - interval '2 hours' WHERE key LIKE 'ntc:%'`);
      await h.db.prisma.$executeRawUnsafe(`UPDATE notices SET next_attempt_at = now() AT TIME ZONE 'UTC' WHERE status = 'pending'`);
      h.app.deps.notices.kick();
      await settled();
      for (const p of phones) {
        const gathered = texts(p).slice(before.get(p));
        expect(gathered, p).toHaveLength(1);
        expect(gathered[0]).toMatch(/\d+ changes were made to your account/);
        expect(gathered[0]).toMatch(/A passkey was added to your account/i);
        expect(gathered[0]).toMatch(/A passkey was removed from your account/i);
        expect(gathered[0].length).toBeLessThan(1200);
      }
      expect(await h.db.prisma.notice.count({ where: { status: "pending" } })).toBe(0);
    });
  });

  describe("two accounts merged", () => {
    beforeAll(async () => {
      h = await startHarness(backend);
    });
    afterAll(() => h?.close());

    // the per-account budget is the account's, its merged secondary's addresses included: link
    // verifies wrote their notices without the account of the change, and the secondary's
    // addresses were counted against the secondary's own budget, a second 20 an hour
    it("tells the addresses of both at most twenty notices an hour in all, whichever change queued them", async () => {
      const a = await h.signIn({ email: "merging-a@example.com" });
      for (let i = 0; i < 3; i++) await attach(a, phone(100 + i));
      const b = await h.signIn({ email: "merging-b@example.com" });
      for (let i = 0; i < 4; i++) await attach(b, phone(110 + i));
      const req = await h.call("POST", "/users/link/request", { body: { email: "merging-b@example.com" }, headers: headers(a) });
      const otp = await h.mailbox.otp("merging-b@example.com");
      const merged = await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp }, headers: headers(a) });
      expect(merged.body.outcome).toBe("merged");
      await settled();
      // a new hour for the merged account: the budgets start empty
      await h.db.prisma.$executeRawUnsafe(`DELETE FROM rate_limits WHERE key LIKE 'ntc:%'`);
      const sentBefore = h.mailbox.messages.length;

      // passkeys cycled (announced by the service) and addresses attached (by link_verify's notices)
      const auth = new SoftAuthenticator(ORIGIN);
      for (let i = 0; i < 2; i++) await removePasskey(a, await addPasskey(a, auth, `Key ${i}`));
      for (let i = 0; i < 3; i++) {
        const added = `merging-added-${i}@example.com`;
        const r = await h.call("POST", "/users/link/request", { body: { email: added }, headers: headers(a) });
        const code = await h.mailbox.otp(added);
        const done = await h.call("POST", "/users/link/verify", { body: { state_id: r.body.state_id, otp: code }, headers: headers(a) });
        expect(done.body.outcome).toBe("attached");
      }
      await settled();
      const notices = h.mailbox.messages.slice(sentBefore).filter((m) => !/Your code is/.test(m.text));
      expect(notices.length).toBeGreaterThan(0);
      expect(notices.length).toBeLessThanOrEqual(20);
    });
  });

  describe("the project's hourly text ceiling", () => {
    beforeAll(async () => {
      h = await startHarness(backend, { env: { LINKGATE_LIMIT_SMS_PER_PROJECT_HOURLY: "3" } });
    });
    afterAll(() => h?.close());

    // twelfth review: one ceiling for both, strangers' code sends to numbers of their own filled it,
    // and the owner heard of a thief's change to the account an hour late
    it("counts codes and security notices against ceilings of their own: strangers' codes do not hold a notice back, and past its own ceiling notices wait", async () => {
      const u = await h.signIn({ email: "ceiling-owner@example.com" });
      await attach(u, phone(50)); // code 1
      await attach(u, phone(51)); // code 2, and notice 1 to the first phone
      await settled();
      expect(texts(phone(50))).toEqual([expect.stringMatching(/A phone number was added to your account/)]);

      // strangers use up the codes' ceiling with numbers of their own
      expect((await h.call("POST", "/auth/otp/start", { body: { phone: phone(52) }, from: "192.0.2.33" })).status).toBe(200); // code 3
      const refused = await h.call("POST", "/auth/otp/start", { body: { phone: phone(53) }, from: "192.0.2.34" });
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
      const alarms = () => h.db.prisma.outboxEvent.count({ where: { eventType: "security.suspicious_activity", body: { contains: '"reason":"send_ceiling_per_project"' } } });
      expect(await alarms()).toBe(1);

      // a change to the account is still told at once: notices 2 and 3
      await addPasskey(u, new SoftAuthenticator(ORIGIN), "Laptop");
      await settled();
      expect(texts(phone(50))).toHaveLength(2);
      expect(texts(phone(51))).toEqual([expect.stringMatching(/A passkey was added/)]);

      // past the notices' own ceiling, they wait, and the refusal is counted under its own name
      const refusals = async () => {
        const text = await (await h.app.fetch(new Request("http://linkgate.test/metrics"))).text();
        const line = text.split("\n").find((l) => l.startsWith('linkgate_rate_limit_refusals_total{limit="notice_sms_per_project"}'));
        return line ? Number(line.split(" ").at(-1)) : 0;
      };
      const refusedBefore = await refusals();
      await addPasskey(u, new SoftAuthenticator(ORIGIN), "Phone");
      await settled();
      expect(await refusals()).toBeGreaterThan(refusedBefore);
      expect(texts(phone(50))).toHaveLength(2);
      expect(texts(phone(51))).toHaveLength(1);
      const held = await h.db.prisma.notice.findMany({ where: { status: "pending", kind: "phone" } });
      expect(held.map((n) => n.value).sort()).toEqual([phone(50), phone(51)]);
      expect(await alarms()).toBe(2);
      // e-mails have their own ceiling: the owner's address was told
      expect(h.mailbox.messages.some((m) => m.to === "ceiling-owner@example.com" && /A passkey was added/.test(m.subject ?? ""))).toBe(true);
    });
  });

  describe("what a notice says", () => {
    beforeAll(async () => {
      h = await startHarness(backend);
    });
    afterAll(() => h?.close());

    it("never repeats the name a user gave a passkey", async () => {
      const u = await h.signIn({ email: "named@example.com" });
      await attach(u, phone(70));
      const bait = "Call +1 900 555 0100 to cancel http://evil.example";
      const auth = new SoftAuthenticator(ORIGIN);
      const id = await addPasskey(u, auth, bait);
      await removePasskey(u, id);
      const told = await until(
        () => texts(phone(70)),
        (t) => t.some((x) => /A passkey was added/.test(x)) && t.some((x) => /passkey was removed/i.test(x)),
      );
      expect(told.some((x) => /A passkey was added to your account/.test(x))).toBe(true);
      for (const text of told) {
        expect(text).not.toContain("900 555 0100");
        expect(text).not.toContain("evil.example");
      }
      const stored = await h.db.prisma.notice.findMany({ where: { value: phone(70) } });
      expect(stored.some((n) => n.text.includes("evil.example") || n.subject.includes("evil.example"))).toBe(false);
    });
  });
});
