// Fixed-window counters in the database, so every gateway process shares one budget.
import type { Db, Tx } from "../db/client.ts";
import { RateLimited } from "../errors.ts";

export type Limit = { max: number; windowSeconds: number };

// One upsert does the read, the window reset and the increment atomically: two processes
// hitting the same key serialize on its row, and neither can overshoot the limit.
async function bump(db: Db | Tx, key: string, windowSeconds: number): Promise<{ count: number; resetsIn: number }> {
  const rows = await db.$queryRaw<{ count: number; resets_in: number }[]>`
    INSERT INTO rate_limits (key, window_start, count) VALUES (${key}, now(), 1)
    ON CONFLICT (key) DO UPDATE SET
      count = CASE WHEN rate_limits.window_start <= now() - make_interval(secs => ${windowSeconds}) THEN 1 ELSE rate_limits.count + 1 END,
      window_start = CASE WHEN rate_limits.window_start <= now() - make_interval(secs => ${windowSeconds}) THEN now() ELSE rate_limits.window_start END
    RETURNING count, ceil(extract(epoch FROM window_start + make_interval(secs => ${windowSeconds}) - now()))::int AS resets_in`;
  return { count: rows[0].count, resetsIn: Math.max(1, rows[0].resets_in) };
}

/** Counts one use of each key; throws RateLimited (with Retry-After) when any is over. */
export async function consume(db: Db | Tx, checks: Array<{ key: string; limit: Limit }>): Promise<void> {
  for (const { key, limit } of checks) {
    const { count, resetsIn } = await bump(db, key, limit.windowSeconds);
    if (count > limit.max) throw new RateLimited(resetsIn);
  }
}

/** Reads a key without counting, for limits that only count failures. */
export async function assertUnder(db: Db | Tx, key: string, limit: Limit): Promise<void> {
  const rows = await db.$queryRaw<{ count: number; resets_in: number }[]>`
    SELECT count, ceil(extract(epoch FROM window_start + make_interval(secs => ${limit.windowSeconds}) - now()))::int AS resets_in
    FROM rate_limits WHERE key = ${key} AND window_start > now() - make_interval(secs => ${limit.windowSeconds})`;
  if (rows[0] && rows[0].count >= limit.max) throw new RateLimited(Math.max(1, rows[0].resets_in));
}

export async function countFailure(db: Db | Tx, key: string, limit: Limit): Promise<void> {
  await bump(db, key, limit.windowSeconds);
}
