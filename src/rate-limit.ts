// Counters over a sliding window in the database (src/rate-limit.sql says how they count), so
// every gateway process shares one budget and no span of a window holds more than its most. Below
// every service (sign-in and linking count codes and messages, webhooks count test events), so
// it knows an identifier only as the kind and value its statements store.
import { isIPv4, isIPv6 } from "node:net";
import type { Database } from "./db/client.ts";
import { ASYNC_COMMIT, prepared, run } from "./db/fast.ts";
import { RateLimited } from "./errors.ts";
import { ipv4From, ipv6Words } from "./ip.ts";
import { recordRateLimitRefusal, type RateLimitName } from "./metrics.ts";
import type { Limit } from "./limits.ts";

export type { Limit };

/** An identifier as the counters store it (src/auth/identifiers.ts normalizes them). */
type Identifier = { kind: string; value: string };

/** How long a successful sign-in makes its place known (src/auth/known-places.ts). */
export const KNOWN_FOR_DAYS = 30;
/**
 * `at`: where the check applies, when not everywhere. "unknown places": not counted or checked
 * when the call comes from a known place of its identifier (Consumption.knownPlaces), since the
 * project-wide and identifier-wide bounds that strangers exhaust must not shut the owner out
 * where they signed in before. "known places": only there, for the budget the owner keeps
 * instead, which must be finite too (docs/security.md, "Known places").
 */
export type Check = { key: string; limit: Limit; at?: "unknown places" | "known places" };

/** A check's `at` as the statements read it: null everywhere, else whether it needs a known place. */
const atKnown = (c: Check): boolean | null => (c.at === undefined ? null : c.at === "known places");

/** Whether the check of flag `x` (atKnown) applies to this call. */
const APPLIES = (x: string) => `(${x} IS NULL OR ${x} = EXISTS (SELECT 1 FROM known))`;

type DbLike = Pick<Database, "driver">;

/**
 * The project's hourly ceiling of texts or e-mails: every message the service sends counts
 * against it, codes (src/auth/otp-flow.ts) and security notices (src/auth/notices.ts).
 */
export const projectSendKey = (projectId: string, kind: "email" | "phone") => `send:prj:${projectId}:${kind}`;

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
  /** The ids of the places the call comes from (src/auth/known-places.ts placesHere), which decide the checks' `at`. */
  knownPlaces?: string[];
  /**
   * Whether a counter that does not exist yet is made by a call that a full counter refuses
   * (NEW_ONLY_IF_ROOM). No, for the calls a client makes (the default). Yes, for the notice
   * sender's messages, which countMessages counts that way and which a client does not choose.
   */
  newCountersWhenRefused?: boolean;
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

/** A counter `c`'s count now (src/rate-limit.sql). */
const LIVE = (c: string) => `rate_limit_count(${c}.slices, ${c}.window_start, ${c}.window_seconds)`;

/**
 * Adds the inserted row's count to the key's counter (src/rate-limit.sql), and returns the
 * counter with what it holds now as `count`: every upsert into rate_limits ends with this.
 */
const BUMP = `
    ON CONFLICT (key) DO UPDATE SET
      slices = rate_limit_bumped(r.slices, r.window_start, r.window_seconds, EXCLUDED.count),
      count = EXCLUDED.count + ${LIVE("r")},
      window_start = rate_limit_moved(r.window_start, r.window_seconds),
      window_seconds = EXCLUDED.window_seconds
    RETURNING key, count, window_start, window_seconds, slices`;

const UPSERT = (keys: string, windows: string, guard: string, at = "NULL::bool[]") => `
    INSERT INTO rate_limits AS r (key, window_start, window_seconds, count, slices)
    SELECT k, now(), w, 1, ARRAY[1] FROM unnest(${keys}::text[], ${windows}::int[], ${at}) AS t(k, w, x)
    WHERE ${guard} AND ${APPLIES("x")}${BUMP}`;

/** The identifier signed in from one of the places $1 names in the last KNOWN_FOR_DAYS (src/auth/known-places.ts). */
const KNOWN = (places: string) => `
    SELECT 1 FROM known_sign_ins
    WHERE id = ANY (${places}::text[]) AND last_at > (now() - make_interval(days => ${KNOWN_FOR_DAYS})) AT TIME ZONE 'UTC' LIMIT 1`;

/**
 * A counted key of this call already at its most in its window: the call is refused whatever
 * else it counts (docs/security.md, "Abuse limits").
 */
const FULL = (keys: string, maxima: string, at: string) => `
    SELECT 1 FROM rate_limits r JOIN unnest(${keys}::text[], ${maxima}::int[], ${at}) AS m(k, mx, x) ON m.k = r.key
    WHERE ${LIVE("r")} >= m.mx AND ${APPLIES("m.x")}
    LIMIT 1`;

/**
 * A counter that does not exist yet is made only for a call that no full counter refuses: an
 * address past its budget sent a code start to a fresh identifier with every request, and each
 * made a counter of that identifier there, so the refused requests of one address wrote a row
 * apiece, as fast as it could send them. Counters that exist count every call, refused or not.
 */
const NEW_ONLY_IF_ROOM = (always: string) => `(${always} OR NOT EXISTS (SELECT 1 FROM at_most) OR EXISTS (SELECT 1 FROM rate_limits e WHERE e.key = t.k))`;

/**
 * Never true, evaluated once: commits this statement without waiting for its WAL to reach disk.
 * Every send of a project bumps the same ceiling row (and every request of one address its
 * address row), and a row stays locked until its transaction's commit is durable, so with a
 * durable commit concurrent sends queued on that row for a disk flush each: 16 link requests
 * at once waited 4.8 to 6.2 ms in this statement against 0.8 ms without the wait (bench/RESULTS.md,
 * link). What a crash of the database can lose is the last fraction of a second of counts and
 * OTP states: a few sends counted too few, and a code that then reads as invalid and is sent
 * again (docs/security.md, "Counted without waiting for the disk").
 */
const NEVER_ASYNC_COMMIT = `NOT (${ASYNC_COMMIT})`;

/**
 * Seconds until the row's counter holds fewer than `max` again, worked out only when its `count`
 * (what it holds now) has reached `max`: the one case a caller reads it (a refusal's
 * Retry-After, a tripped ceiling's alarm). 0 otherwise.
 */
const RESETS_IN = (max: string, count = "count") =>
  `CASE WHEN ${count} >= ${max} THEN coalesce(rate_limit_wait(slices, window_start, window_seconds, ${max}), 0) ELSE 0 END`;

/**
 * Counts and checks every key of one call in one statement. Each upsert does read, window
 * reset and increment atomically: two processes hitting the same key serialize on its row and
 * neither can overshoot. The ceilings' upsert reads the narrow counters' results through the
 * CTE, so it still costs one round trip (a send checks up to seven keys; as separate statements
 * that was seven round trips and seven commits), and so do the known-place lookup and the OTP
 * state written when nothing refuses. Arguments: $1–$3 counted keys, windows, maxima; $4, $5
 * ceilings' keys and windows (their maxima are checked by the caller); $6, $7 peeked keys and
 * maxima; $8–$11 who may already own the identifier (account, project, kind, value: the
 * account null for no such check); $12–$17 the OTP state (id null for none); $18–$20 where
 * each counted, ceiling and peeked key applies (atKnown); $21 the places' ids; $22 whether a
 * refused call makes counters that do not exist yet (Consumption.newCountersWhenRefused); $23
 * the ceilings' maxima (for how long a full one refuses).
 */
const COUNT_ALL = prepared<Row>(
  "count_all",
  { key: "text", count: "int4", resets_in: "int4", peeked: "bool", what: "text" },
  `WITH own AS (
      SELECT 1 FROM account_sign_in_identifiers($8::text) i
      WHERE $8::text IS NOT NULL AND i.kind = $10::text::identifier_kind AND i.value = $11::text
    ),
    known AS (${KNOWN("$21")}),
    at_most AS (${FULL("$1", "$3", "$18::bool[]")}),
    bumped AS (${UPSERT("$1", "$2", `NOT EXISTS (SELECT 1 FROM own) AND ${NEW_ONLY_IF_ROOM("$22::bool")}`, "$18::bool[]")}),
    peeked AS (
      SELECT key, ${LIVE("rate_limits")} AS count, window_start, window_seconds, slices, x.mx FROM rate_limits
      JOIN unnest($6::text[], $20::bool[], $7::int[]) AS x(k, at, mx) ON x.k = rate_limits.key
      WHERE ${LIVE("rate_limits")} > 0 AND ${APPLIES("x.at")}
    ),
    refused AS (
      SELECT 1 FROM own
      UNION ALL
      SELECT 1 FROM bumped b JOIN unnest($1::text[], $3::int[]) AS m(k, mx) ON m.k = b.key WHERE b.count > m.mx
      UNION ALL
      SELECT 1 FROM peeked p JOIN unnest($6::text[], $7::int[]) AS m(k, mx) ON m.k = p.key WHERE p.count >= m.mx
    ),
    ceiling AS (${UPSERT("$4", "$5", "NOT EXISTS (SELECT 1 FROM refused)", "$19::bool[]")}),
    state AS (
      INSERT INTO otp_states (id, project_id, account_id, session_id, purpose, kind, value, code_hash, expires_at, created_at)
      SELECT $12::text, $9::text, $13::text, $14::text, $15::text::otp_purpose, $10::text::identifier_kind, $11::text, $16::text,
             (now() + make_interval(secs => $17::int)) AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC'
      WHERE $12::text IS NOT NULL AND NOT EXISTS (SELECT 1 FROM refused)
      RETURNING id
    )
    SELECT key, count, ${RESETS_IN("m.mx")} AS resets_in, false AS peeked, 'counter' AS what
      FROM bumped JOIN unnest($1::text[], $3::int[]) AS m(k, mx) ON m.k = bumped.key
    UNION ALL SELECT key, count, ${RESETS_IN("mx")}, true, 'counter' FROM peeked
    UNION ALL SELECT key, count, ${RESETS_IN("m.mx")}, false, 'counter'
      FROM ceiling JOIN unnest($4::text[], $23::int[]) AS m(k, mx) ON m.k = ceiling.key
    UNION ALL SELECT NULL, 0, 0, false, 'own' FROM own
    UNION ALL SELECT NULL, 0, 0, false, 'known' FROM known
    UNION ALL SELECT id, 0, 0, false, 'state' FROM state
    UNION ALL SELECT NULL, 0, 0, false, 'never' WHERE ${NEVER_ASYNC_COMMIT}`,
);

export type Counted = {
  counters: Counter[];
  /** the identifier already signs into the account (unlessOwnedBy) */
  owned: boolean;
  stateWritten: boolean;
  /** the call came from a known place: its "unknown places" checks were skipped, its "known places" ones made */
  known: boolean;
};

export async function countAll(db: DbLike, c: Consumption): Promise<Counter[]> {
  return (await countAndWrite(db, c)).counters;
}

/**
 * A counter as a caller reads it, from the count a statement returned and the key's most: a
 * counted key refuses past its most (and trips at the first count past it), a peeked one at it.
 */
function counterOf(r: { key: string; count: number; resets_in: number }, max: number, peeked = false): Counter {
  return {
    key: r.key,
    count: r.count,
    resetsIn: Math.max(1, r.resets_in),
    over: peeked ? r.count >= max : r.count > max,
    tripped: !peeked && r.count === max + 1,
  };
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
    c.count.map(atKnown),
    ceilings.map(atKnown),
    peek.map(atKnown),
    c.knownPlaces ?? [],
    c.newCountersWhenRefused ?? false,
    ceilings.map((x) => x.limit.max),
  ]);
  const limits = new Map([...c.count, ...ceilings, ...peek].map((x) => [x.key, x.limit.max]));
  const counters = rows.filter((r) => r.what === "counter").map((r) => counterOf(r, limits.get(r.key)!, r.peeked));
  return {
    counters,
    owned: rows.some((r) => r.what === "own"),
    stateWritten: rows.some((r) => r.what === "state"),
    known: rows.some((r) => r.what === "known"),
  };
}

/**
 * One message of countMessages: its own counters, and the ceiling it counts against when they
 * allow it. No known places here: `at` is not read.
 */
export type Message = { count: Check[]; ceiling?: Check };

/**
 * The counters of `keys`, each bumped by as many messages as name it, in key order: two
 * statements that bump the same keys lock them in the same order and cannot deadlock.
 */
const BUMP_ALL = (keys: string) => `
    INSERT INTO rate_limits AS r (key, window_start, window_seconds, count, slices)
    SELECT k, now(), w, n, ARRAY[n] FROM ${keys} ORDER BY k${BUMP}`;

/**
 * Each message's count of key k: the counter after the statement, less the messages after it
 * in the batch that name k too. `checks` is (k, m, mx): message m names key k, whose most is mx.
 */
const AT_MESSAGE = (checks: string, keys: string, bumped: string) => `
    SELECT x.m, x.k AS key, x.mx,
           (b.count - g.n + row_number() OVER (PARTITION BY x.k ORDER BY x.m))::int AS count,
           b.window_start, b.window_seconds, b.slices
    FROM ${checks} x JOIN ${keys} g ON g.k = x.k JOIN ${bumped} b ON b.key = x.k`;

/**
 * countAll for many messages at once, in one statement: what the notice sender does with a
 * batch (one message per destination, src/auth/notices.ts), so a batch costs one round trip and
 * one commit for its counts, not one per destination. Each message is counted as if by its own
 * countAll call (with newCountersWhenRefused), in order: its counters first, then its ceilings
 * only when none of its own counters refuses it. A key several messages name (an account's budget, the project's ceiling)
 * is upserted once with their number, and each message reads the count it reached.
 * Arguments: $1–$4 the messages' own checks (key, message number from 1, window, most);
 * $5–$7 each message's ceiling, in message order (key or null, window, most).
 */
const COUNT_MESSAGES = prepared<{ m: number; key: string; count: number; mx: number; resets_in: number }>(
  "count_messages",
  { m: "int4", key: "text", count: "int4", mx: "int4", resets_in: "int4" },
  `WITH own AS (SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::int[]) AS t(k, m, w, mx)),
    own_keys AS (SELECT k, min(w) AS w, count(*)::int AS n FROM own GROUP BY k),
    own_bumped AS (${BUMP_ALL("own_keys")}),
    own_counts AS (${AT_MESSAGE("own", "own_keys", "own_bumped")}),
    allowed AS (
      SELECT c.k, c.m::int AS m, c.w, c.mx FROM unnest($5::text[], $6::int[], $7::int[]) WITH ORDINALITY AS c(k, w, mx, m)
      WHERE c.k IS NOT NULL AND NOT EXISTS (SELECT 1 FROM own_counts o WHERE o.m = c.m AND o.count > o.mx)
    ),
    ceiling_keys AS (SELECT k, min(w) AS w, count(*)::int AS n FROM allowed GROUP BY k),
    ceiling_bumped AS (${BUMP_ALL("ceiling_keys")}),
    ceiling_counts AS (${AT_MESSAGE("allowed", "ceiling_keys", "ceiling_bumped")})
    SELECT m, key, count, mx, ${RESETS_IN("mx")} AS resets_in FROM own_counts
    UNION ALL SELECT m, key, count, mx, ${RESETS_IN("mx")} FROM ceiling_counts
    UNION ALL SELECT 0, NULL, 0, 0, 0 WHERE ${NEVER_ASYNC_COMMIT}`,
);

/** Counts `messages` in one statement (COUNT_MESSAGES); the counters of each, in order. */
export async function countMessages(db: DbLike, messages: Message[]): Promise<Counter[][]> {
  if (!messages.length) return [];
  const own = messages.flatMap((msg, i) => msg.count.map((c) => ({ c, m: i + 1 })));
  const ceilings = messages.map((msg) => msg.ceiling);
  const rows = await run(db, COUNT_MESSAGES, [
    own.map((x) => x.c.key),
    own.map((x) => x.m),
    own.map((x) => x.c.limit.windowSeconds),
    own.map((x) => x.c.limit.max),
    ceilings.map((c) => c?.key ?? null),
    ceilings.map((c) => c?.limit.windowSeconds ?? null),
    ceilings.map((c) => c?.limit.max ?? null),
  ]);
  const counters = messages.map((): Counter[] => []);
  for (const r of rows) if (r.m > 0) counters[r.m - 1].push(counterOf(r, r.mx));
  return counters;
}

/** Throws RateLimited with the longest wait among the counters that refuse. */
export function assertNoneOver(counters: Counter[]): void {
  const over = counters.filter((x) => x.over);
  if (over.length) throw new RateLimited(Math.max(...over.map((x) => x.resetsIn)));
}

export async function consume(db: DbLike, count: Check[], peek: Check[] = []): Promise<void> {
  assertNoneOver(await countAll(db, { count, peek }));
}

/**
 * Bounds an unauthenticated call that stores something (passkey sign-in options, an OpenID
 * Connect authorization or logout page) per client-address group, so nobody can fill a table from one place
 * (docs/security.md, "Abuse limits"); a refusal is counted under `name` in the metrics.
 */
export async function consumePerAddress(
  db: DbLike,
  name: "sign_in_options_per_address" | "provider_pages_per_address" | "embedded_provider_pages_per_address" | "external_flows_per_address",
  clientAddress: string,
  limit: Limit,
): Promise<void> {
  await consumeNamed(db, name, `unauth:${name}:${addressGroup(clientAddress)}`, limit);
}

/**
 * Bounds a signed-in call that stores something (passkey registration options) per account: a
 * stranger's own account is all it takes to make them, and only the account's holder can use
 * up its budget.
 */
export async function consumePerAccount(db: DbLike, name: "registration_options_per_account" | "profile_updates_per_account", accountId: string, limit: Limit): Promise<void> {
  await consumeNamed(db, name, `acc:${name}:${accountId}`, limit);
}

/**
 * Bounds a call a project's secret key makes that queues work for the shared workers (test
 * events, redeliveries): only the project's own keys can use up its budget.
 */
export async function consumePerProject(db: DbLike, name: "test_events_per_project" | "redeliveries_per_project", projectId: string, limit: Limit): Promise<void> {
  await consumeNamed(db, name, `prj:${name}:${projectId}`, limit);
}

async function consumeNamed(db: DbLike, name: RateLimitName, key: string, limit: Limit): Promise<void> {
  const counters = await countAll(db, { count: [{ key, limit }] });
  if (counters.some((c) => c.over)) recordRateLimitRefusal(name);
  assertNoneOver(counters);
}

/** Reads keys without counting (e.g. failures so far) and throws when any is at its limit. */
export async function assertUnder(db: DbLike, peek: Check[]): Promise<void> {
  await consume(db, [], peek);
}

/** Failure counters as their checks read them: over at the limit, `tripped` by the failure that reached it. */
function failureCounters(rows: { key: string; count: number; resets_in: number }[], checks: Check[]): Counter[] {
  const limits = new Map(checks.map((x) => [x.key, x.limit.max]));
  return rows.map((r) => {
    const max = limits.get(r.key)!;
    return { key: r.key, count: r.count, resetsIn: Math.max(1, r.resets_in), over: r.count >= max, tripped: r.count === max };
  });
}

const READ_COUNTERS = prepared<{ key: string; count: number; resets_in: number }>(
  "read_counters",
  { key: "text", count: "int4", resets_in: "int4" },
  `SELECT key, ${LIVE("r")} AS count, ${RESETS_IN("m.mx", LIVE("r"))} AS resets_in
   FROM rate_limits r JOIN unnest($1::text[], $2::int[]) AS m(k, mx) ON m.k = r.key
   WHERE ${LIVE("r")} > 0`,
);

/**
 * Counters as they stand, counting nothing: one counted by a statement of its own (a wrong code,
 * src/auth/sign-in.sql wrong_code_counted) that its caller alarms on. `tripped`: at exactly its
 * maximum, which one count reaches once per window. A counter with no live window is left out.
 */
export async function readCounters(db: DbLike, checks: Check[]): Promise<Counter[]> {
  return failureCounters(await run(db, READ_COUNTERS, [checks.map((x) => x.key), checks.map((x) => x.limit.max)]), checks);
}

/**
 * The identifier of OTP state `s` took its hourly wrong codes from everywhere (its counter `r`
 * in rate_limits under the key `prefix` || project:kind:value has reached `max`) and the call
 * does not come from one of its known places (`places`, src/auth/known-places.ts placesHere,
 * hashed here with the state's identifier exactly as placeIds hashes them). Its arguments are
 * SQL expressions: checkOtp (src/auth/otp.ts) guards the count of a try with it, so judging a
 * code stays one statement, and STATE_FAILURES reads it to say how long the wait is.
 */
export function identifierCappedCondition(prefix: string, max: string, places: string): string {
  return `r.key = ${prefix}::text || s.project_id || ':' || s.kind::text || ':' || s.value
     AND ${LIVE("r")} >= ${max}::int
     AND NOT EXISTS (
       SELECT 1 FROM known_sign_ins k JOIN unnest(${places}::text[]) AS p(place)
         ON k.id = encode(sha256(convert_to(s.project_id || E'\\n' || s.kind::text || E'\\n' || s.value || E'\\n' || p.place, 'UTF8')), 'hex')
       WHERE k.last_at > (now() - make_interval(days => ${KNOWN_FOR_DAYS})) AT TIME ZONE 'UTC')`;
}

/** How long the identifier of state $1 (of project $2) stays capped: identifierCappedCondition($3, $4, $5). */
const STATE_FAILURES = prepared<{ count: number; resets_in: number }>(
  "state_failures",
  { count: "int4", resets_in: "int4" },
  `SELECT ${LIVE("r")} AS count, ${RESETS_IN("$4::int", LIVE("r"))} AS resets_in
   FROM otp_states s JOIN rate_limits r ON ${identifierCappedCondition("$3", "$4", "$5")}
   WHERE s.id = $1::text AND s.project_id = $2::text`,
);

/**
 * Seconds until the identifier of a state takes wrong codes again from here, or null when it
 * does: the identifier-wide cap, read before a code is judged.
 */
export async function stateIdentifierCapped(db: DbLike, projectId: string, stateId: string, keyPrefix: string, limit: Limit, places: string[]): Promise<number | null> {
  const [row] = await run(db, STATE_FAILURES, [stateId, projectId, keyPrefix, limit.max, places]);
  return row ? Math.max(1, row.resets_in) : null;
}

/** How long the identifier of state $1 (of project $2) takes no wrong code from address group $3 (src/auth/sign-in.sql sign_in_address_capped). */
const STATE_ADDRESS_FAILURES = prepared<{ resets_in: number | null }>(
  "state_address_failures",
  { resets_in: "int4" },
  `SELECT sign_in_address_capped(s.project_id, s.kind, s.value, $3::text, $4::int) AS resets_in
   FROM otp_states s WHERE s.id = $1::text AND s.project_id = $2::text`,
);

/** Seconds until the identifier of a state takes wrong codes from this address group again, or null when it does. */
export async function stateAddressCapped(db: DbLike, projectId: string, stateId: string, address: { group: string; max: number }): Promise<number | null> {
  const [row] = await run(db, STATE_ADDRESS_FAILURES, [stateId, projectId, address.group, address.max]);
  return row?.resets_in != null ? Math.max(1, row.resets_in) : null;
}

/**
 * The group a client address is counted in (docs/security.md, "Abuse limits"): an IPv4 address
 * on its own, an IPv6 address by its /64. One IPv6 subscriber is usually handed a whole /64
 * (often more), so counting single IPv6 addresses would give them 2^64 fresh budgets. The full
 * address is what people are shown (sessions, events); only counter keys use the group.
 */
export function addressGroup(address: string): string {
  if (isIPv4(address)) return address;
  if (!isIPv6(address)) return address; // NO_SOCKET, or whatever an embedding passes
  const hextets = ipv6Words(address.split("%")[0]);
  // an address that carries an IPv4 one is that IPv4 client: mapped (::ffff:a.b.c.d, also in hex),
  // translated (::ffff:0:a.b.c.d, SIIT), NAT64 (64:ff9b::a.b.c.d) or the old compatible form
  // (::a.b.c.d); by their /64 all IPv4 clients of an IPv6-only network behind a translator were one
  const zero = (from: number, to: number) => hextets.slice(from, to).every((h) => h === 0);
  const v4 = ipv4From(hextets[6], hextets[7]);
  if (zero(0, 5) && hextets[5] === 0xffff) return v4;
  if (zero(0, 4) && hextets[4] === 0xffff && hextets[5] === 0) return v4;
  if (hextets[0] === 0x64 && hextets[1] === 0xff9b && zero(2, 6)) return v4;
  if (zero(0, 6) && hextets[6] !== 0) return v4;
  return `${hextets.slice(0, 4).map((h) => h.toString(16)).join(":")}::/64`;
}
