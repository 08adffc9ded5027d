// Fixed-window counters in the database, so every gateway process shares one budget.
import type { Db, Tx } from "../db/client.ts";
import { RateLimited } from "../errors.ts";

export type Limit = { max: number; windowSeconds: number };
export type Check = { key: string; limit: Limit };

type Row = { key: string; count: number; resets_in: number };

/**
 * Counts one use of every `count` key and reads every `peek` key (limits that only count
 * failures), all in one statement, and throws RateLimited with the longest wait when any is
 * over. One upsert per key does read, window reset and increment atomically: two processes
 * hitting the same key serialize on its row and neither can overshoot. A send checks three
 * keys; as three statements that was three round trips and three commits.
 */
export async function consume(db: Db | Tx, count: Check[], peek: Check[] = []): Promise<void> {
  const rows = await db.$queryRaw<Row[]>`
    WITH bumped AS (
      INSERT INTO rate_limits (key, window_start, window_seconds, count)
      SELECT k, now(), w, 1 FROM unnest(${count.map((c) => c.key)}::text[], ${count.map((c) => c.limit.windowSeconds)}::int[]) AS t(k, w)
      ON CONFLICT (key) DO UPDATE SET
        count = CASE WHEN rate_limits.window_start <= now() - make_interval(secs => EXCLUDED.window_seconds) THEN 1 ELSE rate_limits.count + 1 END,
        window_start = CASE WHEN rate_limits.window_start <= now() - make_interval(secs => EXCLUDED.window_seconds) THEN now() ELSE rate_limits.window_start END,
        window_seconds = EXCLUDED.window_seconds
      RETURNING key, count, window_start, window_seconds
    )
    SELECT key, count, ceil(extract(epoch FROM window_start + make_interval(secs => window_seconds) - now()))::int AS resets_in FROM bumped
    UNION ALL
    SELECT key, count, ceil(extract(epoch FROM window_start + make_interval(secs => window_seconds) - now()))::int
    FROM rate_limits WHERE key = ANY (${peek.map((c) => c.key)}::text[]) AND window_start > now() - make_interval(secs => window_seconds)`;
  const limits = new Map([...count, ...peek].map((c) => [c.key, c.limit.max]));
  const peeked = new Set(peek.map((c) => c.key));
  const over = rows.filter((r) => (peeked.has(r.key) ? r.count >= limits.get(r.key)! : r.count > limits.get(r.key)!));
  if (over.length) throw new RateLimited(Math.max(1, ...over.map((r) => r.resets_in)));
}

/** Reads keys without counting (e.g. failures so far) and throws when any is at its limit. */
export async function assertUnder(db: Db | Tx, peek: Check[]): Promise<void> {
  await consume(db, [], peek);
}

export async function countFailure(db: Db | Tx, key: string, limit: Limit): Promise<void> {
  await db.$executeRaw`
    INSERT INTO rate_limits (key, window_start, window_seconds, count) VALUES (${key}, now(), ${limit.windowSeconds}, 1)
    ON CONFLICT (key) DO UPDATE SET
      count = CASE WHEN rate_limits.window_start <= now() - make_interval(secs => EXCLUDED.window_seconds) THEN 1 ELSE rate_limits.count + 1 END,
      window_start = CASE WHEN rate_limits.window_start <= now() - make_interval(secs => EXCLUDED.window_seconds) THEN now() ELSE rate_limits.window_start END,
      window_seconds = EXCLUDED.window_seconds`;
}
