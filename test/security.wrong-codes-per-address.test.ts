// A stranger who knows only a victim's address (twelfth review): the wrong codes per identifier
// and client address (15 an hour) were read only before a code was sent, never when one was
// judged. Five states opened first took five wrong codes each, so one address gave 25 at once;
// four addresses reached the identifier-wide cap of 100 with no wait, in 120 requests, and from
// then on the victim could sign in by code only from their known places, for an hour, again
// and again. Now a code is not judged from an address whose wrong codes for that identifier
// reached the limit, whichever state it belongs to.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";

const LIMIT = 15; // wrong codes per identifier and client address an hour, the default
const STATES = 5; // sends per identifier and client address in 10 minutes, the default

describe.each(backends)("wrong codes per identifier and client address are judged at every verify on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const start = (from: string, email: string) => h.call("POST", "/auth/otp/start", { body: { email }, from });
  const verify = (from: string, stateId: string, otp: string) => h.call("POST", "/auth/otp/verify", { body: { state_id: stateId, otp }, from });
  const wrongCodesCounted = async (email: string) => {
    const row = await h.db.prisma.rateLimit.findFirst({ where: { key: { startsWith: "fail:id:" }, AND: { key: { endsWith: `:email:${email}` } } } });
    return row?.count ?? 0;
  };

  it("states opened first give one address no more than its 15 wrong codes; the 16th is 429 and not counted", async () => {
    const email = "victim-states@example.com";
    const attacker = "198.51.100.77";
    const states: string[] = [];
    for (let i = 0; i < STATES; i++) {
      const s = await start(attacker, email);
      expect(s.status).toBe(200);
      states.push(s.body.state_id);
    }
    const answers: number[] = [];
    for (const state of states) for (let i = 0; i < 5; i++) answers.push((await verify(attacker, state, i % 2 ? "111111" : "222222")).status);
    expect(answers.slice(0, LIMIT)).toEqual(Array(LIMIT).fill(400));
    expect(answers.slice(LIMIT)).toEqual(Array(STATES * 5 - LIMIT).fill(429));
    expect(await wrongCodesCounted(email)).toBe(LIMIT);
  });

  it("the right code of a state opened before is not judged from that address either, and works from elsewhere", async () => {
    const email = "victim-right@example.com";
    const attacker = "198.51.100.78";
    const first = await start(attacker, email);
    const code = await h.mailbox.otp(email);
    const others: string[] = [];
    for (let i = 1; i < STATES; i++) others.push((await start(attacker, email)).body.state_id);
    for (const state of others.slice(0, 3)) for (let i = 0; i < 5; i++) await verify(attacker, state, "333333");
    const refused = await verify(attacker, first.body.state_id, code);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);

    // the owner, elsewhere, signs in as ever
    const owner = await start("203.0.113.20", email);
    expect((await verify("203.0.113.20", owner.body.state_id, await h.mailbox.otp(email))).status).toBe(200);
  });

  // thirteenth round: the same through link requests, by as many accounts as a stranger signs up
  it("link states opened first by two accounts at one address give it no more than its 15 wrong codes", async () => {
    const email = "victim-links@example.com";
    const attacker = "198.51.100.79";
    const accounts = [await h.signIn({ email: "taker-1@evil.example" }), await h.signIn({ email: "taker-2@evil.example" })];
    const states: Array<{ token: string; stateId: string }> = [];
    for (let i = 0; i < STATES; i++) {
      const { token } = accounts[i < 3 ? 0 : 1];
      const requested = await h.call("POST", "/users/link/request", { body: { email }, headers: { authorization: `Bearer ${token}` }, from: attacker });
      expect(requested.status).toBe(200);
      states.push({ token, stateId: requested.body.state_id });
    }
    const answers: number[] = [];
    for (const { token, stateId } of states) {
      for (let i = 0; i < 5; i++) {
        const res = await h.call("POST", "/users/link/verify", { body: { state_id: stateId, otp: "555555" }, headers: { authorization: `Bearer ${token}` }, from: attacker });
        answers.push(res.status);
      }
    }
    expect(answers.slice(0, LIMIT)).toEqual(Array(LIMIT).fill(400));
    expect(answers.slice(LIMIT)).toEqual(Array(STATES * 5 - LIMIT).fill(429));
    expect(await wrongCodesCounted(email)).toBe(LIMIT);
  });

  it("four addresses no longer reach the identifier-wide cap: the owner still signs in from a new place", async () => {
    const email = "victim-cap@example.com";
    for (const attacker of ["198.51.100.81", "198.51.100.82", "198.51.100.83", "198.51.100.84"]) {
      const states: string[] = [];
      for (let i = 0; i < STATES; i++) states.push((await start(attacker, email)).body.state_id);
      for (const state of states) for (let i = 0; i < 5; i++) await verify(attacker, state, "444444");
    }
    expect(await wrongCodesCounted(email)).toBe(4 * LIMIT);
    const owner = await start("203.0.113.21", email);
    expect(owner.status).toBe(200);
    expect((await verify("203.0.113.21", owner.body.state_id, await h.mailbox.otp(email))).status).toBe(200);
  });
});
