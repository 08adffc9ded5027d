// A limit holds in every span of its window (docs/security.md, "Abuse limits"). The counters
// were fixed windows, each starting at the first count after the last one ended: five codes an
// address may send an identifier in ten minutes could be five in the last second of one window
// and five more in the first second of the next, ten within two seconds; the hundred wrong codes
// an identifier takes in an hour, two hundred. Time is moved by ageing the counters' rows, as
// the database's clock would.
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

  describe("the counting, quarter by quarter (src/rate-limit.sql)", () => {
    const one = async <T>(sql: string): Promise<T> => ((await h.db.prisma.$queryRawUnsafe<{ v: T }[]>(`SELECT ${sql} AS v`))[0].v);

    it("adds to the newest quarter, moves the slices on by the quarters gone by, keeps five", async () => {
      expect(await one("rate_limit_bumped(ARRAY[]::int[], 0, 1)")).toEqual([1]);
      expect(await one("rate_limit_bumped(ARRAY[2, 3], 0, 1)")).toEqual([3, 3]);
      expect(await one("rate_limit_bumped(ARRAY[1], 3, 1)")).toEqual([1, 0, 0, 1]);
      expect(await one("rate_limit_bumped(ARRAY[5, 4, 3, 2, 1], 2, 7)")).toEqual([7, 0, 5, 4, 3]);
      expect(await one("rate_limit_bumped(ARRAY[5, 4, 3, 2, 1], 5, 7)")).toEqual([7]);
    });

    it("holds the five newest quarters, and one less for each quarter gone by", async () => {
      const counts = [];
      for (let shift = 0; shift <= 6; shift++) counts.push(await one(`rate_limit_live(ARRAY[1, 10, 100, 1000, 10000], ${shift})`));
      expect(counts).toEqual([11111, 1111, 111, 11, 1, 0, 0]);
    });
  });
});
