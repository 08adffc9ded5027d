// Guesses sent all at once (31st review): the identifier's wrong-code counters were read when a
// code was judged but counted afterwards, by a statement of its own, so verifies sent in
// parallel were all judged before any of them was counted. 40 address groups with 5 states each
// had 1,000 wrong codes of one identifier judged in one burst, against a cap of 100 an hour. Now
// the codes of one identifier are judged in turns and a wrong one is counted in its turn, on
// every path that judges a code: a sign-in (sign_in_verify), a link (link_verify) and a
// re-authentication (otp_judge). Each case fires more wrong codes at once than the cap allows
// and finds exactly the cap judged (400 OTPInvalid) and every other one refused (429).
//
// Also here: made-up state ids count against nothing. A stale token posting them counted against
// its account's wrong codes, which locked the owner out of linking for an hour.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codeHash } from "../src/auth/otp.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";

const CAP = 12; // wrong codes per identifier an hour, from everywhere
const STATES = 4; // 4 states × 5 tries = 20 wrong codes on offer, more than the cap
const ADDRESSES = ["198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4"];

describe.each(backends)("wrong codes sent at once on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_LIMIT_WRONG_CODES_PER_IDENTIFIER_HOURLY: String(CAP) } });
  });
  afterAll(() => h?.close());

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const codeHashOf = (stateId: string, code: string) => codeHash(h.app.deps.otpKey, stateId, code);
  /** The identifier's wrong codes counted from everywhere: one per code judged wrong. */
  const counted = async (email: string) => {
    const row = await h.db.prisma.rateLimit.findFirst({ where: { key: { startsWith: "fail:id:" }, AND: { key: { endsWith: `:email:${email}` } } } });
    return row?.count ?? 0;
  };
  type State = { id: string; from: string; code: string };
  /** Every state's five tries at once, each a different code that is not the one sent. */
  const allAtOnce = (states: State[], verify: (s: State, otp: string) => Promise<{ status: number; body: any }>) =>
    Promise.all(states.flatMap((s) => Array.from({ length: 5 }, (_, t) => verify(s, String((Number(s.code) + 1 + t) % 1_000_000).padStart(6, "0")))));
  const tally = (answers: Array<{ status: number; body: any }>) => {
    const out: Record<string, number> = {};
    for (const a of answers) out[`${a.status} ${a.body.error}`] = (out[`${a.status} ${a.body.error}`] ?? 0) + 1;
    return out;
  };

  it("sign-in: from four addresses, exactly the cap is judged", async () => {
    const email = "parallel-sign-in@example.com";
    const states = [];
    for (const from of ADDRESSES) {
      const r = await h.call("POST", "/auth/otp/start", { body: { email }, from });
      states.push({ id: r.body.state_id as string, from, code: await h.mailbox.otp(email) });
    }
    const answers = await allAtOnce(states, (s, otp) => h.call("POST", "/auth/otp/verify", { body: { state_id: s.id, otp }, from: s.from }));
    expect(tally(answers)).toEqual({ "400 OTPInvalid": CAP, "429 RateLimited": STATES * 5 - CAP });
    expect(await counted(email)).toBe(CAP);
  });

  it("linking: exactly the cap is judged", async () => {
    const user = await h.signIn({ email: "parallel-linker@example.com" });
    const target = "parallel-link-target@example.com";
    const states = [];
    for (const from of ADDRESSES) {
      const r = await h.call("POST", "/users/link/request", { body: { email: target }, headers: bearer(user.token), from });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      states.push({ id: r.body.state_id as string, from, code: await h.mailbox.otp(target) });
    }
    const answers = await allAtOnce(states, (s, otp) => h.call("POST", "/users/link/verify", { body: { state_id: s.id, otp }, headers: bearer(user.token), from: s.from }));
    expect(tally(answers)["400 OTPInvalid"]).toBe(CAP);
    expect(await counted(target)).toBe(CAP);
  });

  it("re-authentication: exactly the cap is judged", async () => {
    const email = "parallel-reauth@example.com";
    const user = await h.signIn({ email });
    const before = await counted(email);
    const states = [];
    for (const from of ADDRESSES) {
      const r = await h.call("POST", "/auth/reauthenticate/start", { body: { email }, headers: bearer(user.token), from });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      states.push({ id: r.body.state_id as string, from, code: await h.mailbox.otp(email) });
    }
    const answers = await allAtOnce(states, (s, otp) => h.call("POST", "/auth/reauthenticate/verify", { body: { state_id: s.id, otp }, headers: bearer(user.token), from: s.from }));
    expect(tally(answers)["400 OTPInvalid"]).toBe(CAP - before);
    expect(await counted(email)).toBe(CAP);
  });

  // During a rolling upgrade, gateways of the previous release call these functions without the
  // windows (and count a wrong code themselves): their wrong codes are judged, not counted twice,
  // and nothing fails on a window that is not there.
  it("a call of the previous release, without the windows, is judged and counts nothing itself", async () => {
    const email = "parallel-previous@example.com";
    const start = await h.call("POST", "/auth/otp/start", { body: { email } });
    const code = await h.mailbox.otp(email);
    const wrong = String((Number(code) + 1) % 1_000_000).padStart(6, "0");
    const checks = { max_tries: 5, fail_prefix: "fail:id:", fail_max: CAP, address_group: "192.0.2.1", address_max: 15, judge_places: [], known_days: 30 };
    const [signIn] = await h.db.prisma.$queryRawUnsafe<{ outcome: string; tries: number }[]>(
      `SELECT outcome, tries FROM sign_in_verify($1::jsonb)`,
      JSON.stringify({ project: h.projectId, state: start.body.state_id, hash: codeHashOf(start.body.state_id, wrong), ...checks }),
    );
    expect(signIn).toEqual({ outcome: "wrong", tries: 1 });

    const user = await h.signIn({ email: "parallel-previous-linker@example.com" });
    const target = "parallel-previous-target@example.com";
    const request = await h.call("POST", "/users/link/request", { body: { email: target }, headers: bearer(user.token) });
    const linkCode = await h.mailbox.otp(target);
    const [link] = await h.db.prisma.$queryRawUnsafe<{ outcome: string; tries: number }[]>(
      `SELECT outcome, tries FROM link_verify($1::jsonb)`,
      JSON.stringify({
        project: h.projectId, account: user.accountId, state: request.body.state_id, hash: codeHashOf(request.body.state_id, String((Number(linkCode) + 1) % 1_000_000).padStart(6, "0")),
        max_tries: 5, fail_key: `fail:acc:${user.accountId}`, fail_max: 15, cap_prefix: "fail:id:", cap_max: CAP, judge_places: [], known_days: 30, address_group: "192.0.2.1", address_max: 15,
      }),
    );
    expect(link).toEqual({ outcome: "wrong", tries: 1 });
    expect(await counted(email)).toBe(0);
    expect(await counted(target)).toBe(0);
    // nor against the account, without its window (fail_window): that gateway counts it itself
    expect(await h.db.prisma.rateLimit.count({ where: { key: `fail:acc:${user.accountId}` } })).toBe(0);
  });

  it("made-up state ids count against nothing: a stale token cannot lock its owner out of linking", async () => {
    const email = "parallel-owner@example.com";
    const stale = await h.signIn({ email });
    await h.db.prisma.$executeRaw`UPDATE sessions SET auth_time = now() - interval '1 day' WHERE account_id = ${stale.accountId}`;
    for (let i = 0; i < 20; i++) {
      const r = await h.call("POST", "/users/link/verify", { body: { state_id: `otp_madeup${i}`, otp: "123456" }, headers: bearer(stale.token) });
      expect(r.body.error).toBe("OTPInvalid");
    }
    expect(await h.db.prisma.rateLimit.count({ where: { key: { startsWith: `fail:acc:${stale.accountId}` } } })).toBe(0);

    const owner = await h.signIn({ email });
    const start = await h.call("POST", "/users/link/request", { body: { email: "parallel-owner-2@example.com" }, headers: bearer(owner.token) });
    expect(start.status).toBe(200);
    const otp = await h.mailbox.otp("parallel-owner-2@example.com");
    const verified = await h.call("POST", "/users/link/verify", { body: { state_id: start.body.state_id, otp }, headers: bearer(owner.token) });
    expect(verified.body).toMatchObject({ outcome: "attached" });
  });
});
