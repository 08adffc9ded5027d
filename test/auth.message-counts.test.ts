// The notice sender counts a whole batch of messages in one statement (countMessages,
// src/rate-limit.ts). Its answer must be exactly what counting the messages one by one
// would have said (countAll, the statement every code send uses), whatever keys the messages
// share: an account's budget named by several destinations, one project ceiling for all, a
// message whose own budget refuses it and so does not reach the ceiling.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countAll, countMessages, type Check, type Counter, type Message } from "../src/rate-limit.ts";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";

const HOUR = 3600;
const own = (name: string, max: number): Check => ({ key: name, limit: { max, windowSeconds: HOUR } });

type Spec = { destination: number; accounts: number[]; ceiling?: "email" | "phone" };

/** A message over a small set of keys, so batches share keys often. */
const message: fc.Arbitrary<Spec> = fc.record({
  destination: fc.integer({ min: 1, max: 4 }),
  accounts: fc.uniqueArray(fc.integer({ min: 1, max: 3 }), { maxLength: 2 }),
  ceiling: fc.option(fc.constantFrom("email", "phone"), { nil: undefined }),
});

/** The messages of `specs` with every key under `prefix`, so each run counts from zero. */
function messagesOf(specs: Spec[], prefix: string): Message[] {
  return specs.map((s) => ({
    count: [own(`${prefix}dst:${s.destination}`, 3), ...s.accounts.map((a) => own(`${prefix}acc:${a}`, 4))],
    ceiling: s.ceiling ? own(`${prefix}prj:${s.ceiling}`, 5) : undefined,
  }));
}

/** What a caller compares: which counters, where they stand, whether they refuse, sorted by key. */
const seen = (counters: Counter[], prefix: string) =>
  counters
    .map((c) => ({ key: c.key.slice(prefix.length), count: c.count, over: c.over, tripped: c.tripped }))
    .sort((a, b) => a.key.localeCompare(b.key));

describe.each(backends)("counting a batch of messages at once, on %s", (backend) => {
  let db: TestDatabase;
  let run = 0;

  beforeAll(async () => {
    db = await openTestDatabase(backend);
  });
  afterAll(() => db?.close());

  it("says for every message what counting the messages one by one says", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(message, { minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 3 }), async (batches) => {
        run++;
        const together = `t${run}:`;
        const oneByOne = `o${run}:`;
        for (const specs of batches) {
          const counted = await countMessages(db, messagesOf(specs, together));
          const expected: Counter[][] = [];
          for (const m of messagesOf(specs, oneByOne)) expected.push(await countAll(db, { count: m.count, ceilings: m.ceiling ? [m.ceiling] : [], newCountersWhenRefused: true }));
          expect(counted.map((c) => seen(c, together))).toEqual(expected.map((c) => seen(c, oneByOne)));
        }
      }),
      { numRuns: backend === "pglite" ? 30 : 60 },
    );
  });

  it("counts a message that its own budget refuses against nothing else", async () => {
    const specs: Spec[] = Array.from({ length: 5 }, () => ({ destination: 1, accounts: [], ceiling: "phone" as const }));
    const counted = await countMessages(db, messagesOf(specs, "refused:"));
    // the destination allows 3: the 4th and 5th are refused, the 4th first (tripped)
    expect(counted.map((c) => c.find((x) => x.key === "refused:dst:1"))).toMatchObject([
      { count: 1, over: false },
      { count: 2, over: false },
      { count: 3, over: false },
      { count: 4, over: true, tripped: true },
      { count: 5, over: true, tripped: false },
    ]);
    expect(counted.map((c) => c.some((x) => x.key === "refused:prj:phone"))).toEqual([true, true, true, false, false]);
    const [ceiling] = await db.prisma.$queryRaw<Array<{ count: number }>>`SELECT count FROM rate_limits WHERE key = 'refused:prj:phone'`;
    expect(ceiling.count).toBe(3);
  });

  it("counts nothing for an empty batch", async () => {
    expect(await countMessages(db, [])).toEqual([]);
  });
});
