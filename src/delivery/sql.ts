// The SQL of the delivery engine, one named function per statement that matters.
//
// Conventions shared by every statement here:
// * Each is a single statement, never an interactive transaction: a statement is atomic on
//   its own, costs one round trip, and holds no connection between round trips, which matters
//   on PGlite (one connection for the whole process) as much as on a busy pg Pool.
// * Every time is the database's `now()`, never a worker's clock: leases and due times stay
//   consistent however far apart the workers' clocks are. Durations travel as milliseconds.
// * A claimed delivery's `next_attempt_at` is moved to its lease expiry. A webhook's due
//   deliveries (the partial index `deliveries_webhook_due_idx`: pending rows by webhook, then
//   next_attempt_at) then start with exactly what can be claimed right now, a crashed worker's
//   deliveries become due again by themselves when their lease runs out, and in-flight rows
//   are never read by the next claim. Live leases are counted in their own small partial index
//   (`deliveries_leased_idx`), so the per-webhook cap never walks a webhook's scheduled retries.
import { Prisma } from "../generated/prisma/client.ts";
import type { Database } from "../db/client.ts";
import { newId } from "../ids.ts";

type Sql = Pick<Database["prisma"], "$queryRaw" | "$executeRaw">;
type DbLike = { prisma: Sql };

/** What the sender needs for one attempt, as returned by claimDue. */
export type ClaimedDelivery = {
  deliveryId: string;
  /** The number of this attempt (1-based): attempts recorded so far + 1. */
  attempt: number;
  projectId: string;
  webhookId: string;
  eventId: string;
  eventType: string;
  /** The exact envelope bytes every attempt sends. */
  body: string;
  url: string;
  secretSealed: string;
  previousSecretSealed: string | null;
  previousSecretExpiresAt: Date | null;
};

export type ClaimOptions = {
  workerId: string;
  /** Most deliveries to claim in this statement. */
  limit: number;
  /** Lease length; the delivery is re-claimable by anyone once it runs out. */
  leaseMs: number;
  /** Most deliveries of one webhook leased at once, across all workers. */
  perWebhookCap: number;
};

type ClaimRow = {
  delivery_id: string;
  attempt: number;
  project_id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  body: string;
  url: string;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_secret_expires_at: Date | null;
};

/**
 * Leases up to `limit` due deliveries to `workerId` and returns everything needed to send them.
 *
 * Why this form: its cost depends on the number of webhooks with work, never on the backlog.
 * * `hooks` is a loose index scan (a recursive CTE that jumps from one webhook_id to the next in
 *   `deliveries_webhook_due_idx`): one index probe per webhook that has pending deliveries, not
 *   one row per delivery. `room` is the cap minus that webhook's live leases (a range scan of
 *   the tiny `deliveries_leased_idx`), for enabled webhooks only: deliveries of a disabled
 *   webhook wait, pending, until it is enabled again.
 * * `ranked` takes, per webhook with room, its oldest due deliveries and no more than it could
 *   use (LATERAL … ORDER BY next_attempt_at LIMIT least(room, limit): an ordered index range
 *   scan that stops after those rows), numbers them per webhook, and the pick is ordered by
 *   (rn, due time): the oldest delivery of every webhook before the second of any, so a
 *   receiver that hangs for the whole timeout, or a burst of 50,000 events for one project,
 *   delays only its own deliveries. At most webhooks x min(cap, limit) rows are read and sorted.
 * * The form it replaces numbered the whole due set with one window over all pending rows and
 *   sorted it on every claim. Measured on Postgres 15 (2 vCPUs, 10 webhooks, limit 50, cap 20):
 *   the statement alone (median of repeated runs, rolled back) took 23 ms at 10,000 pending
 *   and 3,020 ms at 1,000,000; this form takes 4.4 ms at both (about 1.5 ms of it execution,
 *   the rest planning). Through Prisma in a claim/record loop: 27 ms and 2,940 ms before,
 *   7.6 ms and 10 ms now (the plan reads the same few hundred index entries at both sizes).
 * * It runs as a prepared statement (the leading comment, see db/client.ts): planning it cost
 *   about twice its execution. Its generic plan cannot know the LIMITs and is estimated at
 *   ~190,000 with a million pending rows, which made Postgres JIT-compile it on every run
 *   (~25 ms): the app's connections run with jit=off.
 * * Rows drained since the last vacuum leave dead entries at the head of each webhook's index
 *   range, which the scans step over (marking them dead as they go) until autovacuum removes
 *   them: that cost follows the recent drain rate, not the size of the backlog.
 * * The lock is taken on `deliveries` one query level up (window functions cannot share a query
 *   level with FOR UPDATE), with the LIMIT at that level too, so it counts rows actually locked:
 *   SKIP LOCKED passes over rows a concurrent claim holds right now and takes the next ones
 *   instead. Each webhook offers up to its whole room, not just its share of this batch, so
 *   concurrent claims still find rows past the ones another claim is locking. The candidates
 *   are handed over as an ordered array (unnest … WITH ORDINALITY) so the planner joins them to
 *   `deliveries` by primary key whatever it guesses their number to be (a plain join let it
 *   pick a sequential scan of the whole table). The due/lease conditions are repeated there:
 *   under READ COMMITTED a row another worker claimed after our snapshot is re-checked against
 *   its new version and dropped. Concurrent workers never wait for each other and never claim
 *   the same row.
 * * The cap is soft across simultaneous claims (two claims can both see the same free room);
 *   the worst case is workers x cap leases for one webhook for one round.
 */
export async function claimDue(db: DbLike, opts: ClaimOptions): Promise<ClaimedDelivery[]> {
  const { workerId, limit, leaseMs, perWebhookCap } = opts;
  if (limit <= 0) return [];
  const rows = await db.prisma.$queryRaw<ClaimRow[]>`/* prepared: claim_due */
    WITH RECURSIVE hooks(webhook_id) AS (
      (SELECT webhook_id FROM deliveries WHERE status = 'pending' ORDER BY webhook_id LIMIT 1)
      UNION ALL
      SELECT (SELECT d.webhook_id FROM deliveries d
              WHERE d.status = 'pending' AND d.webhook_id > h.webhook_id
              ORDER BY d.webhook_id LIMIT 1)
      FROM hooks h
      WHERE h.webhook_id IS NOT NULL
    ),
    room AS MATERIALIZED (
      SELECT w.id AS webhook_id,
             ${perWebhookCap}::int - (SELECT count(*)::int FROM deliveries l
                                      WHERE l.webhook_id = w.id AND l.status = 'pending'
                                        AND l.lease_until IS NOT NULL AND l.lease_until > now()) AS room
      FROM hooks h
      JOIN webhooks w ON w.id = h.webhook_id AND w.enabled
    ),
    ranked AS (
      SELECT c.id, c.next_attempt_at,
             row_number() OVER (PARTITION BY r.webhook_id ORDER BY c.next_attempt_at) AS rn
      FROM room r
      CROSS JOIN LATERAL (
        SELECT d.id, d.next_attempt_at
        FROM deliveries d
        WHERE d.webhook_id = r.webhook_id AND d.status = 'pending' AND d.next_attempt_at <= now()
          AND (d.lease_until IS NULL OR d.lease_until <= now())
        ORDER BY d.next_attempt_at
        LIMIT least(r.room, ${limit}::int)
      ) c
      WHERE r.room > 0
    ),
    picked AS (
      SELECT d.id
      FROM unnest(ARRAY(SELECT id FROM ranked ORDER BY rn, next_attempt_at)) WITH ORDINALITY AS c(id, ord)
      JOIN deliveries d ON d.id = c.id
      WHERE d.status = 'pending' AND d.next_attempt_at <= now()
        AND (d.lease_until IS NULL OR d.lease_until <= now())
      ORDER BY c.ord
      LIMIT ${limit}::int
      FOR UPDATE OF d SKIP LOCKED
    )
    UPDATE deliveries d
    SET lease_until = now() + ${leaseMs}::int * interval '1 millisecond',
        next_attempt_at = now() + ${leaseMs}::int * interval '1 millisecond',
        leased_by = ${workerId}
    FROM picked p, outbox_events e, webhooks w
    WHERE d.id = p.id AND e.id = d.event_id AND w.id = d.webhook_id
    RETURNING d.id AS delivery_id, d.attempts + 1 AS attempt, d.project_id, d.webhook_id,
              e.id AS event_id, e.event_type, e.body, w.url, w.secret_sealed,
              w.previous_secret_sealed, w.previous_secret_expires_at`;
  return rows.map((r) => ({
    deliveryId: r.delivery_id,
    attempt: Number(r.attempt),
    projectId: r.project_id,
    webhookId: r.webhook_id,
    eventId: r.event_id,
    eventType: r.event_type,
    body: r.body,
    url: r.url,
    secretSealed: r.secret_sealed,
    previousSecretSealed: r.previous_secret_sealed,
    previousSecretExpiresAt: r.previous_secret_expires_at,
  }));
}

/**
 * Extends this worker's leases on `ids`; returns the ids still held. One statement for the
 * whole in-flight set. A missing id means the lease was lost (it expired and someone else
 * claimed it, or it was released): the send goes on, but its result will not be applied.
 */
export async function renewLeases(db: DbLike, workerId: string, ids: string[], leaseMs: number): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db.prisma.$queryRaw<{ id: string }[]>`
    UPDATE deliveries
    SET lease_until = now() + ${leaseMs}::int * interval '1 millisecond',
        next_attempt_at = now() + ${leaseMs}::int * interval '1 millisecond'
    WHERE id = ANY (${ids}::text[]) AND leased_by = ${workerId} AND status = 'pending'
    RETURNING id`;
  return rows.map((r) => r.id);
}

/** The state a delivery moves to after one attempt (see schedule.ts). */
export type DeliveryResult = {
  deliveryId: string;
  /** The attempt-log row's id; fixed when the result is made, so recording it again after an
   *  ambiguous failure (the commit happened, the answer was lost) cannot log it twice. */
  attemptId?: string;
  attempt: number;
  /** `pending` means "retry after delayMs". */
  status: "pending" | "succeeded" | "failed" | "gone";
  delayMs: number | null;
  statusCode: number | null;
  error: string | null;
  /** The attempt-log row. */
  startedAt: Date;
  durationMs: number;
  responseExcerpt: string | null;
  requestHeaders: Record<string, string>;
};

/** Postgres text cannot hold NUL; a receiver's response can. */
const pgText = (s: string | null): string | null => (s === null ? null : s.replace(/\u0000/g, "\uFFFD"));

/**
 * Applies a batch of attempt results: updates the deliveries and appends the attempt log.
 * Returns the ids of the deliveries that were updated.
 *
 * Why this form:
 * * One statement for the whole batch, arrays in and `unnest` out: the cost of recording is
 *   one round trip per batch, not two per delivery.
 * * Both writes are data-modifying CTEs of that one statement, so they commit together without
 *   a transaction: no attempt row without its delivery update, and nothing held open.
 * * A delivery is updated only while this worker still holds it (`leased_by`) and only from
 *   the attempt number it was claimed at, so a worker whose lease ran out (and whose delivery
 *   someone else has since sent) cannot overwrite the newer outcome, and a result can never be
 *   applied twice. The attempt row is written either way: the request was sent, and the log
 *   says what went over the wire. (Rows of deliveries deleted meanwhile are skipped.)
 */
export async function recordResults(db: DbLike, workerId: string, results: DeliveryResult[]): Promise<string[]> {
  if (results.length === 0) return [];
  const ids = results.map((r) => r.deliveryId);
  const attemptIds = results.map((r) => r.attemptId ?? newId("att"));
  const attempts = results.map((r) => r.attempt);
  const statuses = results.map((r) => r.status);
  const delays = results.map((r) => (r.status === "pending" ? Math.max(0, Math.round(r.delayMs ?? 0)) : null));
  const codes = results.map((r) => r.statusCode);
  const errors = results.map((r) => pgText(r.error));
  const started = results.map((r) => r.startedAt.getTime());
  const durations = results.map((r) => Math.max(0, Math.round(r.durationMs)));
  const excerpts = results.map((r) => pgText(r.responseExcerpt));
  const headers = results.map((r) => pgText(JSON.stringify(r.requestHeaders)));
  const rows = await db.prisma.$queryRaw<{ id: string }[]>`/* prepared: record_results */
    WITH r AS (
      SELECT * FROM unnest(${ids}::text[], ${attempts}::int[], ${statuses}::text[], ${delays}::int[],
                           ${codes}::int[], ${errors}::text[], ${attemptIds}::text[], ${started}::float8[],
                           ${durations}::int[], ${excerpts}::text[], ${headers}::text[])
        AS r(id, attempt, status, delay_ms, code, error, attempt_id, started_ms, duration_ms, excerpt, headers)
    ),
    updated AS (
      UPDATE deliveries d
      SET status = r.status::delivery_status,
          attempts = r.attempt,
          next_attempt_at = CASE WHEN r.status = 'pending'
                                 THEN now() + r.delay_ms * interval '1 millisecond'
                                 ELSE d.next_attempt_at END,
          lease_until = NULL,
          leased_by = NULL,
          last_status = r.code,
          last_error = r.error,
          completed_at = CASE WHEN r.status = 'pending' THEN NULL ELSE now() END
      FROM r
      WHERE d.id = r.id AND d.leased_by = ${workerId} AND d.status = 'pending' AND d.attempts = r.attempt - 1
      RETURNING d.id
    ),
    logged AS (
      INSERT INTO delivery_attempts (id, delivery_id, attempt, started_at, duration_ms, status_code, error,
                                     response_excerpt, request_headers)
      SELECT r.attempt_id, r.id, r.attempt, to_timestamp(r.started_ms / 1000.0), r.duration_ms, r.code, r.error,
             r.excerpt, r.headers::jsonb
      FROM r
      WHERE EXISTS (SELECT 1 FROM deliveries d WHERE d.id = r.id)
      ON CONFLICT (id) DO NOTHING
    )
    SELECT id FROM updated`;
  return rows.map((r) => r.id);
}

/**
 * Gives back this worker's leases (all of them, or only `ids`) and makes those deliveries due
 * immediately, for a graceful shutdown or a claim that arrived after stop(). Other workers
 * pick them up at once instead of waiting for the leases to run out. (`lease_until IS NOT
 * NULL` holds for every leased row and lets this read the small `deliveries_leased_idx`
 * instead of every row: ~350 ms with a million pending.)
 */
export async function releaseLeases(db: DbLike, workerId: string, ids?: string[]): Promise<number> {
  const only = ids ? Prisma.sql`AND id = ANY (${ids}::text[])` : Prisma.empty;
  return db.prisma.$executeRaw`
    UPDATE deliveries
    SET lease_until = NULL, leased_by = NULL, next_attempt_at = now()
    WHERE leased_by = ${workerId} AND status = 'pending' AND lease_until IS NOT NULL ${only}`;
}
