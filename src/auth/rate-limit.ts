// Fixed-window counters in the database, so every gateway process shares one budget.
import type { Database } from "../db/client.ts";
import { prepared, run } from "../db/fast.ts";
import { RateLimited } from "../errors.ts";
import type { Limit } from "../deps.ts";
import type { Identifier } from "./identifiers.ts";

export type { Limit };
export type Check = { key: string; limit: Limit };

type DbLike = Pick<Database, "driver">;

/** One counter after a call: `over` when it refuses; `tripped` when this call was its first refusal in the window. */
export type Counter = { key: string; count: number; resetsIn: number; over: boolean; tripped: boolean };

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
  /**
   * An OTP state to write when nothing refuses, in the same statement: a send costs one round
   * trip and one commit for its counters and its state together.
   */
  otpState?: NewOtpState;
  /**
   * Counts nothing and writes no state when `identifier` already signs into `accountId` (its own,
   * attached or its merged secondary's): linking asks this before anything is counted.
   */
  unlessOwnedBy?: { projectId: string; accountId: string; identifier: Identifier };
};

export type NewOtpState = {
  id: string;
  projectId: string;
  accountId: string | null;
  sessionId: string | null;
  purpose: string;
  identifier: Identifier;
  codeHash: string;
  ttlSeconds: number;
};

type Row = { key: string; count: number; resets_in: number; peeked: boolean; what: string };

const UPSERT = (keys: string, windows: string, guard: string) => `
    INSERT INTO rate_limits AS r (key, window_start, window_seconds, count)
    SELECT k, now(), w, 1 FROM unnest(${keys}::text[], ${windows}::int[]) AS t(k, w)
    WHERE ${guard}
    ON CONFLICT (key) DO UPDATE SET
      count = CASE WHEN r.window_start <= now() - make_interval(secs => EXCLUDED.window_seconds) THEN 1 ELSE r.count + 1 END,
      window_start = CASE WHEN r.window_start <= now() - make_interval(secs => EXCLUDED.window_seconds) THEN now() ELSE r.window_start END,
      window_seconds = EXCLUDED.window_seconds
    RETURNING key, count, window_start, window_seconds`;

const RESETS_IN = "ceil(extract(epoch FROM window_start + make_interval(secs => window_seconds) - now()))::int";

/**
 * Counts and checks every key of one call in one statement. Each upsert does read, window
 * reset and increment atomically: two processes hitting the same key serialize on its row and
 * neither can overshoot. The ceilings' upsert reads the narrow counters' results through the
 * CTE, so it still costs one round trip (a send checks up to six keys; as separate statements
 * that was six round trips and six commits), and so does the OTP state written when nothing
 * refuses. Arguments: $1–$3 counted keys, windows, maxima; $4, $5 ceilings' keys and windows
 * (their maxima are checked by the caller); $6, $7 peeked keys and maxima; $8–$11 who may
 * already own the identifier (account, project, kind, value: the account null for no such
 * check); $12–$17 the OTP state (id null for none).
 */
const COUNT_ALL = prepared<Row>(
  "count_all",
  { key: "text", count: "int4", resets_in: "int4", peeked: "bool", what: "text" },
  `WITH own AS (
      SELECT 1 FROM identifiers i JOIN accounts a ON a.id = i.account_id
      WHERE $8::text IS NOT NULL AND i.project_id = $9::text AND i.kind = $10::text::identifier_kind AND i.value = $11::text
        AND (a.id = $8::text OR (a.merged_with_id = $8::text AND a.merge_role = 'secondary'))
    ),
    bumped AS (${UPSERT("$1", "$2", "NOT EXISTS (SELECT 1 FROM own)")}),
    peeked AS (
      SELECT key, count, window_start, window_seconds FROM rate_limits
      WHERE key = ANY ($6::text[]) AND window_start > now() - make_interval(secs => window_seconds)
    ),
    refused AS (
      SELECT 1 FROM own
      UNION ALL
      SELECT 1 FROM bumped b JOIN unnest($1::text[], $3::int[]) AS m(k, mx) ON m.k = b.key WHERE b.count > m.mx
      UNION ALL
      SELECT 1 FROM peeked p JOIN unnest($6::text[], $7::int[]) AS m(k, mx) ON m.k = p.key WHERE p.count >= m.mx
    ),
    ceiling AS (${UPSERT("$4", "$5", "NOT EXISTS (SELECT 1 FROM refused)")}),
    state AS (
      INSERT INTO otp_states (id, project_id, account_id, session_id, purpose, kind, value, code_hash, expires_at, created_at)
      SELECT $12::text, $9::text, $13::text, $14::text, $15::text::otp_purpose, $10::text::identifier_kind, $11::text, $16::text,
             (now() + make_interval(secs => $17::int)) AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC'
      WHERE $12::text IS NOT NULL AND NOT EXISTS (SELECT 1 FROM refused)
      RETURNING id
    )
    SELECT key, count, ${RESETS_IN} AS resets_in, false AS peeked, 'counter' AS what FROM bumped
    UNION ALL SELECT key, count, ${RESETS_IN}, true, 'counter' FROM peeked
    UNION ALL SELECT key, count, ${RESETS_IN}, false, 'counter' FROM ceiling
    UNION ALL SELECT NULL, 0, 0, false, 'own' FROM own
    UNION ALL SELECT id, 0, 0, false, 'state' FROM state`,
);

export type Counted = { counters: Counter[]; /** the identifier already signs into the account (unlessOwnedBy) */ owned: boolean; stateWritten: boolean };

export async function countAll(db: DbLike, c: Consumption): Promise<Counter[]> {
  return (await countAndWrite(db, c)).counters;
}

/** countAll, and what became of the OTP state and the ownership check. */
export async function countAndWrite(db: DbLike, c: Consumption): Promise<Counted> {
  const ceilings = c.ceilings ?? [];
  const peek = c.peek ?? [];
  const s = c.otpState;
  const guard = c.unlessOwnedBy;
  const identifier = s?.identifier ?? guard?.identifier;
  const rows = await run(db, COUNT_ALL, [
    c.count.map((x) => x.key),
    c.count.map((x) => x.limit.windowSeconds),
    c.count.map((x) => x.limit.max),
    ceilings.map((x) => x.key),
    ceilings.map((x) => x.limit.windowSeconds),
    peek.map((x) => x.key),
    peek.map((x) => x.limit.max),
    guard?.accountId ?? null,
    s?.projectId ?? guard?.projectId ?? null,
    identifier?.kind ?? null,
    identifier?.value ?? null,
    s?.id ?? null,
    s?.accountId ?? null,
    s?.sessionId ?? null,
    s?.purpose ?? null,
    s?.codeHash ?? null,
    s?.ttlSeconds ?? null,
  ]);
  const limits = new Map([...c.count, ...ceilings, ...peek].map((x) => [x.key, x.limit.max]));
  const counters = rows
    .filter((r) => r.what === "counter")
    .map((r) => {
      const max = limits.get(r.key)!;
      return {
        key: r.key,
        count: r.count,
        resetsIn: Math.max(1, r.resets_in),
        over: r.peeked ? r.count >= max : r.count > max,
        tripped: !r.peeked && r.count === max + 1,
      };
    });
  return { counters, owned: rows.some((r) => r.what === "own"), stateWritten: rows.some((r) => r.what === "state") };
}

/** Throws RateLimited with the longest wait among the counters that refuse. */
export function assertNoneOver(counters: Counter[]): void {
  const over = counters.filter((x) => x.over);
  if (over.length) throw new RateLimited(Math.max(...over.map((x) => x.resetsIn)));
}

export async function consume(db: DbLike, count: Check[], peek: Check[] = []): Promise<void> {
  assertNoneOver(await countAll(db, { count, peek }));
}

/** Reads keys without counting (e.g. failures so far) and throws when any is at its limit. */
export async function assertUnder(db: DbLike, peek: Check[]): Promise<void> {
  await consume(db, [], peek);
}

const COUNT_FAILURES = prepared<{ key: string; count: number }>("count_failures", { key: "text", count: "int4" }, `
  WITH bumped AS (${UPSERT("$1", "$2", "true")}) SELECT key, count FROM bumped`);

/** Counts one failure against each key (wrong codes), in one statement. */
export async function countFailures(db: DbLike, checks: Check[]): Promise<void> {
  if (checks.length) await run(db, COUNT_FAILURES, [checks.map((x) => x.key), checks.map((x) => x.limit.windowSeconds)]);
}
