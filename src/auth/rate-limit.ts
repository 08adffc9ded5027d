// Fixed-window counters in the database, so every gateway process shares one budget.
import type { Db, Tx } from "../db/client.ts";
import { RateLimited } from "../errors.ts";
import { Prisma } from "../generated/prisma/client.ts";
import type { Limit } from "../deps.ts";

export type { Limit };
export type Check = { key: string; limit: Limit };

/** One counter after a call: `over` when it refuses; `tripped` when this call was its first refusal in the window. */
export type Counter = { key: string; count: number; resetsIn: number; over: boolean; tripped: boolean };

type Row = { key: string; count: number; resets_in: number; peeked: boolean };

export type Consumption = {
  /** counted on every call */
  count: Check[];
  /**
   * counted only when no `count` or `peek` key refuses the call: a shared ceiling (a project's
   * hourly texts) must not be drained by requests that a narrower limit already turned away,
   * or one client could use up everybody's budget from a single address
   */
  ceilings?: Check[];
  /** read without counting (failures so far); refuse at the limit */
  peek?: Check[];
};

/**
 * Counts and checks every key of one call in one statement. Each upsert does read, window
 * reset and increment atomically: two processes hitting the same key serialize on its row and
 * neither can overshoot. The ceilings' upsert reads the narrow counters' results through the
 * CTE, so it still costs one round trip (a send checks up to six keys; as separate statements
 * that was six round trips and six commits).
 */
export async function countAll(db: Db | Tx, c: Consumption): Promise<Counter[]> {
  const ceilings = c.ceilings ?? [];
  const peek = c.peek ?? [];
  const rows = await db.$queryRaw<Row[]>`
    WITH bumped AS (${upsert(c.count)}),
    peeked AS (
      SELECT key, count, window_start, window_seconds FROM rate_limits
      WHERE key = ANY (${peek.map((x) => x.key)}::text[]) AND window_start > now() - make_interval(secs => window_seconds)
    ),
    refused AS (
      SELECT 1 FROM bumped b JOIN unnest(${c.count.map((x) => x.key)}::text[], ${c.count.map((x) => x.limit.max)}::int[]) AS m(k, mx)
        ON m.k = b.key WHERE b.count > m.mx
      UNION ALL
      SELECT 1 FROM peeked p JOIN unnest(${peek.map((x) => x.key)}::text[], ${peek.map((x) => x.limit.max)}::int[]) AS m(k, mx)
        ON m.k = p.key WHERE p.count >= m.mx
    ),
    ceiling AS (${upsert(ceilings, true)})
    SELECT key, count, ${resetsIn} AS resets_in, false AS peeked FROM bumped
    UNION ALL SELECT key, count, ${resetsIn}, true FROM peeked
    UNION ALL SELECT key, count, ${resetsIn}, false FROM ceiling`;
  const limits = new Map([...c.count, ...ceilings, ...peek].map((x) => [x.key, x.limit.max]));
  return rows.map((r) => {
    const max = limits.get(r.key)!;
    return {
      key: r.key,
      count: r.count,
      resetsIn: Math.max(1, r.resets_in),
      over: r.peeked ? r.count >= max : r.count > max,
      tripped: !r.peeked && r.count === max + 1,
    };
  });
}

const resetsIn = Prisma.raw("ceil(extract(epoch FROM window_start + make_interval(secs => window_seconds) - now()))::int");

function upsert(checks: Check[], onlyIfNoneRefused = false) {
  return Prisma.sql`
    INSERT INTO rate_limits AS r (key, window_start, window_seconds, count)
    SELECT k, now(), w, 1 FROM unnest(${checks.map((x) => x.key)}::text[], ${checks.map((x) => x.limit.windowSeconds)}::int[]) AS t(k, w)
    ${onlyIfNoneRefused ? Prisma.sql`WHERE NOT EXISTS (SELECT 1 FROM refused)` : Prisma.empty}
    ON CONFLICT (key) DO UPDATE SET
      count = CASE WHEN r.window_start <= now() - make_interval(secs => EXCLUDED.window_seconds) THEN 1 ELSE r.count + 1 END,
      window_start = CASE WHEN r.window_start <= now() - make_interval(secs => EXCLUDED.window_seconds) THEN now() ELSE r.window_start END,
      window_seconds = EXCLUDED.window_seconds
    RETURNING key, count, window_start, window_seconds`;
}

/** Throws RateLimited with the longest wait among the counters that refuse. */
export function assertNoneOver(counters: Counter[]): void {
  const over = counters.filter((x) => x.over);
  if (over.length) throw new RateLimited(Math.max(...over.map((x) => x.resetsIn)));
}

export async function consume(db: Db | Tx, count: Check[], peek: Check[] = []): Promise<void> {
  assertNoneOver(await countAll(db, { count, peek }));
}

/** Reads keys without counting (e.g. failures so far) and throws when any is at its limit. */
export async function assertUnder(db: Db | Tx, peek: Check[]): Promise<void> {
  await consume(db, [], peek);
}

/** Counts one failure against each key (wrong codes), in one statement. */
export async function countFailures(db: Db | Tx, checks: Check[]): Promise<void> {
  if (checks.length) await db.$executeRaw`${upsert(checks)}`;
}
