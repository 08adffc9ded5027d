// A limit holds in every span of its window (docs/security.md, "Abuse limits"). The counters
// were fixed windows, each starting at the first count after the last one ended: five codes an
// address may send an identifier in ten minutes could be five in the last second of one window
// and five more in the first second of the next, ten within two seconds; the hundred wrong codes
// an identifier takes in an hour, two hundred. Time is moved by ageing the counters' rows, as
// the database's clock would.
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";

describe.each(backends)("limits over a sliding window, on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const from = "198.51.100.23";
  const start = (email: string) => h.call("POST", "/auth/otp/start", { body: { email }, from });
  /** Every counter's counts, `seconds` older. */
  const age = (seconds: number) => h.db.prisma.$executeRawUnsafe(`UPDATE rate_limits SET window_start = window_start - make_interval(secs => ${seconds})`);

  it("five codes at the end of ten minutes leave no fresh five at the start of the next ten", async () => {
    const email = "edge-of-the-window@example.com";
    expect((await start(email)).status).toBe(200);
    await age(599);
    for (let i = 0; i < 4; i++) expect((await start(email)).status).toBe(200);
    // the first code is ten minutes and a second old: a fixed window had ended, and took five more
    await age(2);
    const refused = await start(email);
    expect(refused.status).toBe(429);
    const wait = Number(refused.headers.get("retry-after"));
    expect(wait).toBeGreaterThan(0);
    // a count leaves the window a window and a quarter after it was made, at the latest
    expect(wait).toBeLessThanOrEqual(750);

    await age(wait);
    expect((await start(email)).status).toBe(200);
  });

  it("a code is forgotten between ten minutes and twelve and a half after it was sent, never sooner", async () => {
    const email = "forgotten-in-time@example.com";
    for (let i = 0; i < 5; i++) expect((await start(email)).status).toBe(200);
    await age(599);
    expect((await start(email)).status).toBe(429);
    await age(750);
    // the refused call counted too (a caller that keeps calling while refused waits longer), and it is a window and a quarter old now
    for (let i = 0; i < 5; i++) expect((await start(email)).status).toBe(200);
    expect((await start(email)).status).toBe(429);
  });

  // A code is judged only while neither the identifier's wrong codes from everywhere nor those
  // from this address are at their most. When both are, the caller is told to come back when
  // both have room: the wait was the first cap's, and the caller came back to be refused again.
  describe("when both caps on wrong codes refuse, Retry-After is the later of their waits", () => {
    const address = "198.51.100.91";
    const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
    /** The identifier's wrong codes from everywhere at their most (100 an hour) and made 50 minutes ago; from this address at their most (15 an hour), made now. */
    /** A counter of an hour holding `count`, all made `ageSeconds` ago. */
    const counter = (key: string, count: number, ageSeconds: number) =>
      h.db.prisma.$executeRaw`INSERT INTO rate_limits (key, window_start, window_seconds, count, slices)
        VALUES (${key}, (now() - make_interval(secs => ${ageSeconds}))::timestamp, 3600, ${count}, ARRAY[${count}]::int[])`;
    async function bothCapsFull(email: string) {
      await counter(`fail:id:${h.projectId}:email:${email}`, 100, 3000);
      await counter(`fail:ida:${h.projectId}:email:${email}@${address}`, 15, 0);
    }
    // the everywhere cap's counts leave within 1,500 s, this address's not before 3,600 s
    const laterWait = (r: { status: number; headers: Headers }) => {
      expect(r.status).toBe(429);
      return Number(r.headers.get("retry-after"));
    };

    it("signing in", async () => {
      const email = "both-caps-sign-in@example.com";
      const started = await h.call("POST", "/auth/otp/start", { body: { email }, from: address });
      await bothCapsFull(email);
      const refused = await h.call("POST", "/auth/otp/verify", { body: { state_id: started.body.state_id, otp: "000000" }, from: address });
      expect(laterWait(refused)).toBeGreaterThanOrEqual(3600);
    });

    it("linking", async () => {
      const user = await h.signIn({ email: "both-caps-linker@example.com" });
      const target = "both-caps-link-target@example.com";
      const requested = await h.call("POST", "/users/link/request", { body: { email: target }, headers: bearer(user.token), from: address });
      expect(requested.status).toBe(200);
      await bothCapsFull(target);
      const refused = await h.call("POST", "/users/link/verify", { body: { state_id: requested.body.state_id, otp: "000000" }, headers: bearer(user.token), from: address });
      expect(laterWait(refused)).toBeGreaterThanOrEqual(3600);
    });

    // Re-authentication and an external sign-in's confirmation code are judged by the same caps
    // (src/auth/otp-flow.ts verifyOtp), which told the first cap's wait, as sign-in and linking did.
    it("re-authenticating", async () => {
      const email = "both-caps-reauth@example.com";
      const user = await h.signIn({ email });
      const started = await h.call("POST", "/auth/reauthenticate/start", { body: { email }, headers: bearer(user.token), from: address });
      expect(started.status, JSON.stringify(started.body)).toBe(200);
      await bothCapsFull(email);
      const refused = await h.call("POST", "/auth/reauthenticate/verify", { body: { state_id: started.body.state_id, otp: "000000" }, headers: bearer(user.token), from: address });
      expect(laterWait(refused)).toBeGreaterThanOrEqual(3600);
    });

    // A signed-in subject's own wrong codes (a link's account, a re-authentication's session) are
    // a third limit on the same verify: at its most, it was answered alone, with its own wait.
    const subjectFullAndAddressCapped = async (subjectKey: string, email: string) => {
      await counter(subjectKey, 15, 3000);
      await counter(`fail:ida:${h.projectId}:email:${email}@${address}`, 15, 0);
    };

    it("re-authenticating, the session's wrong codes at their most too", async () => {
      const email = "both-caps-reauth-session@example.com";
      const user = await h.signIn({ email });
      const started = await h.call("POST", "/auth/reauthenticate/start", { body: { email }, headers: bearer(user.token), from: address });
      expect(started.status, JSON.stringify(started.body)).toBe(200);
      await subjectFullAndAddressCapped(`fail:ses:${decodeJwt(user.token).sid}`, email);
      const refused = await h.call("POST", "/auth/reauthenticate/verify", { body: { state_id: started.body.state_id, otp: "000000" }, headers: bearer(user.token), from: address });
      expect(laterWait(refused)).toBeGreaterThanOrEqual(3600);
    });

    it("linking, the account's wrong codes at their most too", async () => {
      const user = await h.signIn({ email: "both-caps-linker-account@example.com" });
      const target = "both-caps-link-account-target@example.com";
      const requested = await h.call("POST", "/users/link/request", { body: { email: target }, headers: bearer(user.token), from: address });
      expect(requested.status).toBe(200);
      await subjectFullAndAddressCapped(`fail:acc:${user.accountId}`, target);
      const refused = await h.call("POST", "/users/link/verify", { body: { state_id: requested.body.state_id, otp: "000000" }, headers: bearer(user.token), from: address });
      expect(laterWait(refused)).toBeGreaterThanOrEqual(3600);
    });
  });

  // docs/operations.md, "Upgrades without downtime": gateways of the previous release serve beside
  // the new ones, at any pace, and come back after a rollback. They count as fixed windows, in
  // count and window_start, and never write slices.
  describe("beside gateways of the previous release", () => {
    const address = "198.51.100.77";
    const startHere = (email: string) => h.call("POST", "/auth/otp/start", { body: { email }, from: address });
    const sendKey = (email: string) => `send:ida:${h.projectId}:email:${email}@${address}`;
    /** A code send counted by a gateway of the previous release: its upsert (src/rate-limit.ts before 20261130090000_sliding_rate_limits), word for word. */
    const previousRelease = (key: string) =>
      h.db.prisma.$executeRawUnsafe(`
        INSERT INTO rate_limits AS r (key, window_start, window_seconds, count)
        SELECT k, now(), w, 1 FROM unnest(ARRAY['${key}']::text[], ARRAY[600]::int[]) AS t(k, w)
        ON CONFLICT (key) DO UPDATE SET
          count = CASE WHEN r.window_start <= now() - make_interval(secs => EXCLUDED.window_seconds) THEN EXCLUDED.count ELSE r.count + EXCLUDED.count END,
          window_start = CASE WHEN r.window_start <= now() - make_interval(secs => EXCLUDED.window_seconds) THEN now() ELSE r.window_start END,
          window_seconds = EXCLUDED.window_seconds`);

    it("a window the previous release starts again brings back no code that had left it", async () => {
      const email = "back-from-the-old-window@example.com";
      for (let i = 0; i < 5; i++) expect((await startHere(email)).status).toBe(200);
      await age(1200);
      // twenty minutes on, a gateway of the previous release sends one: its window had ended, so
      // it starts a new one at 1, and leaves the five of twenty minutes ago where they were
      await previousRelease(sendKey(email));
      // one code in the last ten minutes: four more are allowed, and not a fifth
      for (let i = 0; i < 4; i++) expect((await startHere(email)).status).toBe(200);
      const refused = await startHere(email);
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get("retry-after"))).toBeLessThanOrEqual(750);
    });

    it("the codes the previous release counts count here too", async () => {
      const email = "counted-by-the-old-build@example.com";
      for (let i = 0; i < 3; i++) await previousRelease(sendKey(email));
      expect((await startHere(email)).status).toBe(200);
      expect((await startHere(email)).status).toBe(200);
      expect((await startHere(email)).status).toBe(429);
    });
  });

  describe("the counting, quarter by quarter (src/rate-limit.sql)", () => {
    const one = async <T>(sql: string): Promise<T> => ((await h.db.prisma.$queryRawUnsafe<{ v: T }[]>(`SELECT ${sql} AS v`))[0].v);

    /** A counter's newest slice as begun `quarters` quarters of a 600 s window ago, and a second more. */
    const begun = (quarters: number) => `(now() - make_interval(secs => ${quarters * 150 + 1}))::timestamp`;

    it("adds to the newest quarter, moves the slices on by the quarters gone by, keeps five", async () => {
      expect(await one(`rate_limit_bumped(ARRAY[]::int[], ${begun(0)}, 600, 1)`)).toEqual([1]);
      expect(await one(`rate_limit_bumped(ARRAY[2, 3], ${begun(0)}, 600, 1)`)).toEqual([3, 3]);
      expect(await one(`rate_limit_bumped(ARRAY[1], ${begun(3)}, 600, 1)`)).toEqual([1, 0, 0, 1]);
      expect(await one(`rate_limit_bumped(ARRAY[5, 4, 3, 2, 1], ${begun(2)}, 600, 7)`)).toEqual([7, 0, 5, 4, 3]);
      expect(await one(`rate_limit_bumped(ARRAY[5, 4, 3, 2, 1], ${begun(5)}, 600, 7)`)).toEqual([7]);
    });

    it("holds the five newest quarters, and one less for each quarter gone by", async () => {
      const counts = [];
      for (let q = 0; q <= 6; q++) counts.push(await one(`rate_limit_count(ARRAY[1, 10, 100, 1000, 10000], ${begun(q)}, 600)`));
      expect(counts).toEqual([11111, 1111, 111, 11, 1, 0, 0]);
    });

    it("says how long until fewer than the most remain", async () => {
      // 10 + 1 counted now; at most 11 they refuse, and the wait ends when the oldest quarter leaves
      const wait = Number(await one(`rate_limit_wait(ARRAY[10, 0, 0, 0, 1], ${begun(0)}, 600, 11)`));
      expect(wait).toBeGreaterThan(148);
      expect(wait).toBeLessThanOrEqual(150);
      expect(await one(`rate_limit_wait(ARRAY[10, 0, 0, 0, 1], ${begun(0)}, 600, 12)`)).toBeNull();
    });
  });
});
