// Guesses sent all at once on different identifiers of one account (33rd review): the wrong
// codes of a signed-in account (link verifies) and of a session (re-authentication verifies)
// were read before a code was judged and counted afterwards, by a statement of their own. The
// identifier's turn (security.parallel-guesses.test.ts) serializes only the codes of one
// identifier, so verifies of states for different identifiers, sent at once, were all judged
// before any of them was counted: one account with four link states took 20 wrong codes in one
// burst, against 15 an hour. Now the account's (or session's) wrong codes are judged in turns
// too, and counted in the statement that judged the code.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";

const PER_ACCOUNT = 15; // wrong codes per signed-in account, and per session, an hour (the default)

describe.each(backends)("wrong codes on several identifiers of one account at once on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const wrong = (code: string, t: number) => String((Number(code) + 1 + t) % 1_000_000).padStart(6, "0");
  type State = { id: string; from: string; code: string };
  /** Every state's five tries at once, each a different code that is not the one sent. */
  const allAtOnce = (states: State[], verify: (s: State, otp: string) => Promise<{ status: number; body: any }>) =>
    Promise.all(states.flatMap((s) => Array.from({ length: 5 }, (_, t) => verify(s, wrong(s.code, t)))));
  const tally = (answers: Array<{ status: number; body: any }>) => {
    const out: Record<string, number> = {};
    for (const a of answers) out[`${a.status} ${a.body.error}`] = (out[`${a.status} ${a.body.error}`] ?? 0) + 1;
    return out;
  };
  const counter = async (key: string) => (await h.db.prisma.rateLimit.findUnique({ where: { key } }))?.count ?? 0;

  it("linking: four identifiers' states, twenty wrong codes at once, exactly the account's limit judged", async () => {
    const user = await h.signIn({ email: "burst-linker@example.com" });
    const states: State[] = [];
    for (let i = 0; i < 4; i++) {
      const target = `burst-target-${i}@example.com`;
      const from = `198.51.100.${10 + i}`;
      const r = await h.call("POST", "/users/link/request", { body: { email: target }, headers: bearer(user.token), from });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      states.push({ id: r.body.state_id, from, code: await h.mailbox.otp(target) });
    }
    const answers = await allAtOnce(states, (s, otp) =>
      h.call("POST", "/users/link/verify", { body: { state_id: s.id, otp }, headers: bearer(user.token), from: s.from }),
    );
    expect(tally(answers)).toEqual({ "400 OTPInvalid": PER_ACCOUNT, "429 RateLimited": 20 - PER_ACCOUNT });
    expect(await counter(`fail:acc:${user.accountId}`)).toBe(PER_ACCOUNT);

    // the right code of a fifth state is refused too, for the rest of the hour
    const fifth = await h.call("POST", "/users/link/request", { body: { email: "burst-target-4@example.com" }, headers: bearer(user.token) });
    expect(fifth.status).toBe(200);
    const otp = await h.mailbox.otp("burst-target-4@example.com");
    const late = await h.call("POST", "/users/link/verify", { body: { state_id: fifth.body.state_id, otp }, headers: bearer(user.token) });
    expect(late.status).toBe(429);
  });

  it("re-authentication: the account's four addresses, twenty wrong codes at once, exactly the session's limit judged", async () => {
    const own = ["burst-reauth@example.com", "burst-reauth-1@example.com", "burst-reauth-2@example.com", "burst-reauth-3@example.com"];
    const user = await h.signIn({ email: own[0] });
    for (const email of own.slice(1)) {
      const r = await h.call("POST", "/users/link/request", { body: { email }, headers: bearer(user.token) });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      const linked = await h.call("POST", "/users/link/verify", { body: { state_id: r.body.state_id, otp: await h.mailbox.otp(email) }, headers: bearer(user.token) });
      expect(linked.body).toMatchObject({ outcome: "attached" });
    }
    const session = (await h.db.prisma.session.findFirst({ where: { accountId: user.accountId }, orderBy: { createdAt: "desc" } }))!.id;
    const states: State[] = [];
    for (const [i, email] of own.entries()) {
      const from = `198.51.100.${20 + i}`;
      const r = await h.call("POST", "/auth/reauthenticate/start", { body: { email }, headers: bearer(user.token), from });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      states.push({ id: r.body.state_id, from, code: await h.mailbox.otp(email) });
    }
    const answers = await allAtOnce(states, (s, otp) =>
      h.call("POST", "/auth/reauthenticate/verify", { body: { state_id: s.id, otp }, headers: bearer(user.token), from: s.from }),
    );
    expect(tally(answers)).toEqual({ "400 OTPInvalid": PER_ACCOUNT, "429 RateLimited": 20 - PER_ACCOUNT });
    expect(await counter(`fail:ses:${session}`)).toBe(PER_ACCOUNT);
  });
});
