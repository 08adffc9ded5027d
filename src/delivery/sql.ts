// The SQL of the delivery engine, one named function per statement that matters. The worker's
// run on the fast path (src/db/fast.ts): prepared, straight on the driver, typed rows. The
// operator's (redelivery and replay, the dashboard's charts: at the end) run a request at a
// time, through Prisma.
//
// Conventions shared by every statement here:
// * Each is a single statement, never an interactive transaction: a statement is atomic on
//   its own, costs one round trip, and holds no connection between round trips, which matters
//   on PGlite (one connection for the whole process) as much as on a busy pg Pool.
// * Every time is the database's `now()`, never a worker's clock: leases and due times stay
//   consistent however far apart the workers' clocks are. Durations travel as milliseconds.
// * A lease is `lease_until` + `leased_by` and nothing else: no index holds either column, and
//   a claim, a renewal and a release change nothing else, so each is a HOT update (a new row
//   version on the same page, no index entry at all) as long as the page has room for it: half
//   of each page is kept free for a claim's and a record's row versions (migration
//   20261126050000_deliveries_fillfactor_50; with a fifth free, records used up the room and
//   only about 4 in 10 claims were HOT). Each marks its transaction
//   `linkgate.lease_only`, and the dashboard's per-state trigger on deliveries skips it
//   (dashboard.count_updated_deliveries in src/delivery/dashboard-states.sql). A claimed delivery keeps its
//   `next_attempt_at`: it stays in its place at the head of its webhook's due range
//   (`deliveries_webhook_due_idx`), so when a worker dies its deliveries are due again, first
//   in line, as soon as their leases run out, and the next claim reads past the few live leases
//   at that head (at most the per-webhook cap) instead of an index of leases.
import type { Database } from "../db/client.ts";
import { ASYNC_COMMIT, prepared, run } from "../db/fast.ts";
import { Prisma } from "../generated/prisma/client.ts";
import { DELIVERY_CHANNEL } from "../webhooks/outbox.ts";
import { leaseFree, PENDING_WEBHOOKS } from "./pending.ts";

type DbLike = Pick<Database, "driver">;

/**
 * The mark of a statement that writes only a lease (lease_until, leased_by): a condition that is
 * always true and sets `linkgate.lease_only` for the rest of the transaction, so the dashboard's
 * per-state trigger on deliveries returns at once (dashboard.count_updated_deliveries in
 * dashboard-states.sql; prisma/schema.prisma, model Delivery). Only the claim, the renewal and the
 * release carry it: a statement that changes a status, a webhook or a creation time must not,
 * or the dashboard's counts miss the change.
 */
const LEASE_ONLY = "set_config('linkgate.lease_only', 'on', true) IS NOT NULL";

/**
 * The mark of the record statement, which stages the dashboard's numbers for its batch itself
 * (dashboard.staged_outcomes, added to the rollups in batches by dashboard.apply_staged in
 * dashboard-states.sql): the per-state trigger on deliveries and the rollup trigger on
 * delivery_attempts return at once for the rest of its transaction. Only a statement that
 * stages every change it makes may carry it, or the dashboard's numbers miss that change.
 */
const STAGED = "set_config('linkgate.staged', 'on', true) IS NOT NULL";

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
  /** When the event was written to the outbox, in ms since the epoch (for the commit → delivered latency). */
  eventCreatedMs: number;
  url: string;
  secretSealed: string;
  previousSecretSealed: string | null;
  previousSecretExpiresAt: Date | null;
  /**
   * performance.now() when the claim was sent: how long the delivery has waited for a send slot
   * since, and which changes of its webhook the claim may not have seen (those the worker heard
   * of after it: send-pool.ts).
   */
  claimedAt: number;
};

export type ClaimOptions = {
  workerId: string;
  /** Most deliveries to claim in this statement. */
  limit: number;
  /** Lease length; the delivery is re-claimable by anyone once it runs out. */
  leaseMs: number;
  /** Most deliveries of one webhook leased at once, across all workers. */
  perWebhookCap: number;
  /**
   * How many more deliveries of each webhook this worker may take (its breakers, breaker.ts):
   * `rooms[i]` for `webhookIds[i]`, `otherwise` for every other webhook; 0 skips a webhook.
   * Absent: the cap alone decides.
   */
  endpointRooms?: EndpointRooms;
  /** How many deliveries this worker holds for each project now (sending or waiting): their turns start after them. */
  projectLoads?: ProjectLoads;
};

export type EndpointRooms = { webhookIds: string[]; rooms: number[]; otherwise: number };
export type ProjectLoads = { projectIds: string[]; loads: number[] };

type ClaimRow = {
  delivery_id: string;
  attempt: number;
  project_id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  body: string;
  event_created_ms: number;
  url: string;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_secret_expires_ms: number | null;
};

/**
 * Leases up to `limit` due deliveries and returns everything needed to send them.
 *
 * Why this form: its cost depends on the number of webhooks with work and the cap, never on
 * the backlog.
 * * `hooks` is PENDING_WEBHOOKS (pending.ts), a loose index scan (a recursive CTE that jumps from
 *   one webhook_id to the next in `deliveries_webhook_due_idx`): one index probe per webhook that
 *   has pending deliveries, not one row per delivery. Deliveries of a disabled webhook wait,
 *   pending, until it is enabled.
 * * `head` is, per enabled webhook, the first `cap` deliveries of its due range in due order
 *   (an ordered index range scan that stops there). Live leases sit at that head: a claim takes
 *   the oldest due deliveries, and a lease leaves the head only by being recorded or released.
 *   So the leases among those `cap` rows are the webhook's leases, its room is `cap` minus
 *   them, and the free rows among them are the ones to take. At most webhooks × cap rows are
 *   read, whatever the backlog.
 * * The pick takes turns by project, then by webhook within it: a project's candidates are
 *   ranked by (rank within their webhook, due time), the oldest delivery of each of its webhooks
 *   before the second of any, and every project's ranks start after the deliveries this worker
 *   holds for it now (`projectLoads`: sending or waiting for a slot, the slots being what the
 *   projects share). A burst of 50,000 events for one project delays only its own deliveries, and
 *   a project with many webhooks gets no more turns than one with a single webhook: taking turns
 *   by webhook alone, 20 webhooks of one project whose receivers answered in half the timeout
 *   held all 50 send slots, and another project's healthy webhook got one delivery a second
 *   (fifteenth review). The load comes from the worker, not from the leases at the webhooks'
 *   heads: a webhook with no room left is not read at all, so its leases would not be counted
 *   (sixteenth review). With one project the order is the webhook round-robin it was; free slots
 *   still all go to whoever has work.
 * * The lock is taken on `deliveries` one query level up (window functions cannot share a query
 *   level with FOR UPDATE), with the LIMIT at that level too, so it counts rows actually locked:
 *   SKIP LOCKED passes over rows a concurrent claim holds right now and takes the next ones
 *   instead. The candidates are handed over as an ordered array (unnest … WITH ORDINALITY) so
 *   the planner joins them to `deliveries` by primary key whatever it guesses their number to
 *   be. The due/lease conditions are repeated there: under READ COMMITTED a row another worker
 *   claimed after our snapshot is re-checked against its new version and dropped. Concurrent
 *   workers never wait for each other and never claim the same row.
 * * A webhook's room is also bounded by what this worker may still send it (`endpointRooms`,
 *   the per-endpoint concurrency of breaker.ts): rows of an endpoint whose breaker is open are
 *   not taken at all, so they occupy no send slot and stay due in the database. Measured on
 *   the fairness benchmark (bench/fairness.ts): three webhooks that never answer took 60 of 50
 *   slots for the whole timeout with the cap alone; with this, one probe each once open. The
 *   rooms travel as two arrays joined to the enabled webhooks before the head scan (a skipped
 *   webhook costs no range scan) and the room of unlisted webhooks as a parameter, so the
 *   generic plan is the same whatever they hold; the worker lists only webhooks whose room
 *   differs from an unknown one's (those it sent to in the last minute, at most).
 * * The cap is soft across simultaneous claims (two claims can both see the same free room);
 *   the worst case is workers × cap leases for one webhook for one round.
 * * Prepared (see db/fast.ts): planning it cost about twice its execution. It must run from its
 *   generic plan, hence the cap in its text (claimStatementFor). That plan is still estimated
 *   high with a big backlog, which made Postgres JIT-compile it on every run: the app's
 *   connections run with jit=off (db/client.ts).
 * * Rows drained since the last vacuum leave dead entries at the head of each webhook's index
 *   range, which the scans step over (marking them dead as they go) until vacuum removes them:
 *   that cost follows the recent drain rate, not the size of the backlog. Both partial indexes
 *   of pending deliveries are kept without deduplication (migration
 *   20261126120000_pending_indexes_without_deduplication): a posting list (one entry for many
 *   rows with the same key, e.g. a webhook's deliveries enqueued in one transaction) is marked
 *   dead only once all its rows are gone, so until then every claim visited each gone row of it
 *   again; a 4-worker drain's claims touched half the buffers without it.
 */
function claimStatement(cap: number) {
  return prepared<ClaimRow>(
    "claim_due",
    {
      delivery_id: "text",
      attempt: "int4",
      project_id: "text",
      webhook_id: "text",
      event_id: "text",
      event_type: "text",
      body: "text",
      event_created_ms: "float8",
      url: "text",
      secret_sealed: "text",
      previous_secret_sealed: "text",
      previous_secret_expires_ms: "float8",
    },
    `WITH RECURSIVE ${PENDING_WEBHOOKS},
     head AS MATERIALIZED (
       SELECT w.id AS webhook_id, w.project_id, c.id, c.next_attempt_at, c.leased, w.mine
       FROM hooks h
       CROSS JOIN LATERAL (
         SELECT w.id, w.project_id, coalesce(r.room, $6::int) AS mine
         FROM webhooks w
         LEFT JOIN unnest($4::text[], $5::int[]) AS r(webhook_id, room) ON r.webhook_id = w.id
         WHERE w.id = h.webhook_id AND w.enabled AND coalesce(r.room, $6::int) > 0
       ) w
       CROSS JOIN LATERAL (
         SELECT d.id, d.next_attempt_at, coalesce(d.lease_until > now(), false) AS leased
         FROM deliveries d
         WHERE d.webhook_id = w.id AND d.status = 'pending' AND d.next_attempt_at <= now()
         ORDER BY d.next_attempt_at
         LIMIT ${cap}
       ) c
     ),
     ranked AS (
       SELECT id, project_id, next_attempt_at, leased,
              row_number() OVER (PARTITION BY webhook_id, leased ORDER BY next_attempt_at) AS rn,
              least(${cap} - count(*) FILTER (WHERE leased) OVER (PARTITION BY webhook_id), mine) AS room
       FROM head
     ),
     turns AS (
       SELECT k.id, k.rn, k.next_attempt_at,
              coalesce(l.load, 0) + row_number() OVER (PARTITION BY k.project_id ORDER BY k.rn, k.next_attempt_at) AS turn
       FROM ranked k
       LEFT JOIN unnest($7::text[], $8::int[]) AS l(project_id, load) ON l.project_id = k.project_id
       WHERE NOT k.leased AND k.rn <= k.room
     ),
     picked AS (
       SELECT d.id
       FROM unnest(ARRAY(SELECT id FROM turns ORDER BY turn, rn, next_attempt_at))
            WITH ORDINALITY AS c(id, ord)
       JOIN deliveries d ON d.id = c.id
       WHERE d.status = 'pending' AND d.next_attempt_at <= now()
         AND ${leaseFree("d")}
       ORDER BY c.ord
       LIMIT $1::int
       FOR UPDATE OF d SKIP LOCKED
     )
     UPDATE deliveries d
     SET lease_until = now() + $2::int * interval '1 millisecond', leased_by = $3::text
     FROM picked p, outbox_events e, webhooks w
     WHERE d.id = p.id AND e.id = d.event_id AND w.id = d.webhook_id
       AND ${ASYNC_COMMIT}
       AND ${LEASE_ONLY}
     RETURNING d.id AS delivery_id, d.attempts + 1 AS attempt, d.project_id, d.webhook_id,
               e.id AS event_id, e.event_type, e.body, (extract(epoch FROM e.created_at) * 1000)::float8 AS event_created_ms,
               w.url, w.secret_sealed, w.previous_secret_sealed,
               (extract(epoch FROM w.previous_secret_expires_at) * 1000)::float8 AS previous_secret_expires_ms`,
  );
}

/**
 * The claim statement for a cap, written into its text: Postgres then runs it from one generic
 * plan. With the cap as a parameter the generic plan could not know how many rows each
 * webhook's head scan returns, was estimated far above a custom plan, and every claim was
 * planned again (a tenth of the database's CPU in a drain, measured with perf).
 */
const claimStatements = new Map<number, ReturnType<typeof claimStatement>>();
function claimStatementFor(cap: number) {
  if (!Number.isSafeInteger(cap) || cap < 1) throw new RangeError(`perWebhookCap must be a positive integer, got ${cap}`);
  let st = claimStatements.get(cap);
  if (!st) claimStatements.set(cap, (st = claimStatement(cap)));
  return st;
}
/** The default cap's statement, declared up front (the row-type test runs every declared statement). */
export const DEFAULT_PER_WEBHOOK_CAP = 20;
claimStatementFor(DEFAULT_PER_WEBHOOK_CAP);

export async function claimDue(db: DbLike, opts: ClaimOptions): Promise<ClaimedDelivery[]> {
  const { workerId, limit, leaseMs, perWebhookCap } = opts;
  if (limit <= 0) return [];
  const rooms = opts.endpointRooms ?? { webhookIds: [], rooms: [], otherwise: perWebhookCap };
  const loads = opts.projectLoads ?? { projectIds: [], loads: [] };
  const claimedAt = performance.now();
  const rows = await run(db, claimStatementFor(perWebhookCap), [limit, leaseMs, workerId, rooms.webhookIds, rooms.rooms, rooms.otherwise, loads.projectIds, loads.loads]);
  return rows.map((r) => ({
    deliveryId: r.delivery_id,
    attempt: r.attempt,
    projectId: r.project_id,
    webhookId: r.webhook_id,
    eventId: r.event_id,
    eventType: r.event_type,
    body: r.body,
    eventCreatedMs: r.event_created_ms,
    url: r.url,
    secretSealed: r.secret_sealed,
    previousSecretSealed: r.previous_secret_sealed,
    previousSecretExpiresAt: r.previous_secret_expires_ms === null ? null : new Date(r.previous_secret_expires_ms),
    claimedAt,
  }));
}

/** A webhook as it is now, for a claimed delivery that waited for a send slot (webhooksNow). */
export type WebhookNow = Pick<ClaimedDelivery, "url" | "secretSealed" | "previousSecretSealed" | "previousSecretExpiresAt"> & { enabled: boolean };

type WebhookNowRow = {
  id: string;
  enabled: boolean;
  url: string;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_secret_expires_ms: number | null;
};

const webhooksNowSql = prepared<WebhookNowRow>(
  "webhooks_now",
  { id: "text", enabled: "bool", url: "text", secret_sealed: "text", previous_secret_sealed: "text", previous_secret_expires_ms: "float8" },
  `SELECT w.id, w.enabled, w.url, w.secret_sealed, w.previous_secret_sealed,
          (extract(epoch FROM w.previous_secret_expires_at) * 1000)::float8 AS previous_secret_expires_ms
   FROM unnest($1::text[], $2::text[]) AS k(id, project_id)
   JOIN webhooks w ON w.id = k.id AND w.project_id = k.project_id`,
);

/**
 * The webhooks of `claimed` as they are now, by id; a webhook deleted since the claim is missing.
 *
 * Why: the claim copies each webhook's URL and secrets into its deliveries, and a delivery can
 * wait in the worker's queue for up to a send's timeout before a slot frees. Sent from that copy,
 * it went to a webhook deleted or disabled meanwhile, to the URL it had been moved from, or
 * signed with a secret a second rotation had dropped (docs/webhooks.md, "Managing endpoints").
 * One statement for all the deliveries a pump starts, by primary key, in each delivery's project.
 */
export async function webhooksNow(db: DbLike, claimed: Pick<ClaimedDelivery, "webhookId" | "projectId">[]): Promise<Map<string, WebhookNow>> {
  const keys = new Map(claimed.map((c) => [c.webhookId, c.projectId]));
  if (keys.size === 0) return new Map();
  const rows = await run(db, webhooksNowSql, [[...keys.keys()], [...keys.values()]]);
  return new Map(
    rows.map((r) => [
      r.id,
      {
        enabled: r.enabled,
        url: r.url,
        secretSealed: r.secret_sealed,
        previousSecretSealed: r.previous_secret_sealed,
        previousSecretExpiresAt: r.previous_secret_expires_ms === null ? null : new Date(r.previous_secret_expires_ms),
      },
    ]),
  );
}

const renewLeasesSql = prepared<{ id: string }>(
  "renew_leases",
  { id: "text" },
  `UPDATE deliveries
   SET lease_until = now() + $3::int * interval '1 millisecond'
   WHERE id = ANY ($1::text[]) AND leased_by = $2::text AND status = 'pending'
     AND ${LEASE_ONLY}
   RETURNING id`,
);

/**
 * Extends this worker's leases on `ids`; returns the ids still held. One statement for the
 * whole in-flight set. A missing id means the lease was lost (it expired and someone else
 * claimed it, or it was released): the send goes on, but its result will not be applied.
 */
export async function renewLeases(db: DbLike, workerId: string, ids: string[], leaseMs: number): Promise<string[]> {
  if (ids.length === 0) return [];
  return (await run(db, renewLeasesSql, [ids, workerId, leaseMs])).map((r) => r.id);
}

/** The state a delivery moves to after one attempt (see schedule.ts). */
export type DeliveryResult = {
  deliveryId: string;
  /** The attempt-log row's id; fixed when the result is made, so recording it again after an
   *  ambiguous failure (the commit happened, the answer was lost) cannot log it twice. */
  attemptId: string;
  attempt: number;
  /** `pending` means "retry after delayMs". */
  status: "pending" | "succeeded" | "failed" | "gone";
  delayMs: number | null;
  statusCode: number | null;
  error: string | null;
  /** The attempt-log row. `startedAt` is also the signature's timestamp (its whole seconds). */
  startedAt: Date;
  durationMs: number;
  responseExcerpt: string | null;
  /**
   * Which secrets signed the request (secretRef of each, current first), or null when no
   * request was made. With the body, the event and startedAt, that is all it takes to rebuild
   * the headers sent (log.ts), so the headers themselves are not stored.
   */
  signedWith: string[] | null;
};

/** Postgres text cannot hold NUL; a receiver's response can. */
const pgText = (s: string | null): string | null => (s === null || !s.includes("\u0000") ? s : s.replace(/\u0000/g, "\uFFFD"));

const recordResultsSql = prepared<{ id: string }>(
  "record_results",
  { id: "text" },
  `WITH r AS (
     SELECT * FROM unnest($2::text[], $3::int[], $4::text[], $5::int[], $6::int[], $7::text[], $8::text[], $9::float8[],
                          $10::int[], $11::text[], $12::text[])
       AS r(id, attempt, status, delay_ms, code, error, attempt_id, started_ms, duration_ms, excerpt, signed_with)
     WHERE ${STAGED}
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
     WHERE d.id = r.id AND d.leased_by = $1::text AND d.status = 'pending' AND d.attempts = r.attempt - 1
     RETURNING d.id, d.project_id, d.webhook_id, d.created_at, d.status, d.attempts, d.completed_at
   ),
   logged AS (
     INSERT INTO delivery_attempts (id, delivery_id, attempt, started_at, duration_ms, status_code, error,
                                    response_excerpt, signed_with)
     SELECT r.attempt_id, r.id, r.attempt, to_timestamp(r.started_ms / 1000.0), r.duration_ms, r.code, r.error,
            r.excerpt, r.signed_with
     FROM r
     WHERE r.id IN (SELECT id FROM updated)
        OR (EXISTS (SELECT 1 FROM deliveries d WHERE d.id = r.id)
            AND NOT EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.id = r.attempt_id))
     RETURNING delivery_id, attempt, started_at, status_code, duration_ms
   ),
   staged AS (
     INSERT INTO dashboard.staged_outcomes (outcomes, states)
     SELECT o.outcomes, coalesce(s.states, '{}')
     FROM (SELECT array_agg(dashboard.outcome(coalesce(u.project_id, d.project_id), coalesce(u.webhook_id, d.webhook_id),
                                              coalesce(u.status, d.status), coalesce(u.attempts, d.attempts),
                                              l.attempt, l.started_at, l.status_code, l.duration_ms)) AS outcomes
           FROM logged l
           LEFT JOIN updated u ON u.id = l.delivery_id
           LEFT JOIN deliveries d ON d.id = l.delivery_id AND u.id IS NULL) o
     CROSS JOIN (SELECT array_agg(ROW(u.webhook_id, date_trunc('hour', u.created_at), u.status, 1,
                                      CASE WHEN u.status = 'succeeded' THEN u.completed_at END, false)::dashboard.delivery_state_change) AS states
                 FROM updated u WHERE u.status <> 'pending') s
     WHERE o.outcomes IS NOT NULL
   )
   SELECT id FROM updated`,
);

/**
 * Applies a batch of attempt results: updates the deliveries and appends the attempt log.
 * Returns the ids of the deliveries that were updated.
 *
 * Why this form:
 * * One statement for the whole batch, arrays in and `unnest` out: the cost of recording is
 *   one round trip per batch, not two per delivery.
 * * Both writes are data-modifying CTEs of that one statement, so they commit together without
 *   a transaction: no attempt row without its delivery update, and nothing held open.
 * * The dashboard's numbers for the batch (each attempt's outcome for the charts, each
 *   delivery that reached a final state for the webhook list) are staged in the same statement,
 *   as one row, and added to the rollups by dashboard.apply_staged, many batches at once
 *   (applyStaged below). Two statement triggers added them at every record before: 35 of the
 *   72 to 85 µs of database CPU per recorded delivery (bench/delivery-statements.ts). Each
 *   attempt is classed by its delivery as this statement leaves it, as the trigger did.
 * * A delivery is updated only while this worker still holds it (`leased_by`) and only from
 *   the attempt number it was claimed at, so a worker whose lease ran out (and whose delivery
 *   someone else has since sent) cannot overwrite the newer outcome, and a result can never be
 *   applied twice. The attempt row is written either way: the request was sent, and the log
 *   says what went over the wire. (Rows of deliveries deleted meanwhile are skipped.)
 * * A result applied now is being recorded for the first time, so its attempt row is simply
 *   inserted. Only a result not applied (a lost lease, or the same batch recorded again after
 *   an answer was lost) is checked for an attempt row with its id first. The blanket
 *   ON CONFLICT (id) DO NOTHING this replaces made every insert a speculative one (~3 % of the
 *   database's CPU in a drain).
 * * The attempt row holds what cannot be recomputed: the outcome, and which secrets signed
 *   the request. The ~700 bytes of headers follow from those and the event (log.ts rebuilds
 *   them for display).
 */
export async function recordResults(db: DbLike, workerId: string, results: DeliveryResult[]): Promise<string[]> {
  if (results.length === 0) return [];
  const n = results.length;
  const ids = new Array<string>(n);
  const attempts = new Array<number>(n);
  const statuses = new Array<string>(n);
  const delays = new Array<number | null>(n);
  const codes = new Array<number | null>(n);
  const errors = new Array<string | null>(n);
  const attemptIds = new Array<string>(n);
  const started = new Array<number>(n);
  const durations = new Array<number>(n);
  const excerpts = new Array<string | null>(n);
  const signedWith = new Array<string | null>(n);
  for (let i = 0; i < n; i++) {
    const r = results[i];
    ids[i] = r.deliveryId;
    attempts[i] = r.attempt;
    statuses[i] = r.status;
    delays[i] = r.status === "pending" ? Math.max(0, Math.round(r.delayMs ?? 0)) : null;
    codes[i] = r.statusCode;
    errors[i] = pgText(r.error);
    attemptIds[i] = r.attemptId;
    started[i] = r.startedAt.getTime();
    durations[i] = Math.max(0, Math.round(r.durationMs));
    excerpts[i] = pgText(r.responseExcerpt);
    signedWith[i] = r.signedWith ? r.signedWith.join(" ") : null;
  }
  const rows = await run(db, recordResultsSql, [workerId, ids, attempts, statuses, delays, codes, errors, attemptIds, started, durations, excerpts, signedWith]);
  return rows.map((r) => r.id);
}

const releaseLeasesSql = prepared<{ id: string }>(
  "release_leases",
  { id: "text" },
  `UPDATE deliveries
   SET lease_until = NULL, leased_by = NULL
   WHERE id = ANY ($1::text[]) AND leased_by = $2::text AND status = 'pending'
     AND ${LEASE_ONLY}
   RETURNING id`,
);

/**
 * Gives back this worker's leases on `ids`, for a graceful shutdown or a claim that arrived
 * after stop(): other workers pick them up at once instead of waiting for the leases to run
 * out. They are still due (a claim keeps next_attempt_at), and first in line. Returns how many
 * were released.
 */
export async function releaseLeases(db: DbLike, workerId: string, ids: string[]): Promise<number> {
  if (ids.length === 0) return 0;
  return (await run(db, releaseLeasesSql, [ids, workerId])).length;
}

const applyStagedSql = prepared<{ applied: number }>("apply_staged", { applied: "int4" }, `SELECT dashboard.apply_staged($1::boolean) AS applied`);

/**
 * Adds the dashboard numbers that record statements staged to its rollups (at most 500 staged
 * batches per call); returns how many batches it added. `wait`: wait for batches another call is
 * adding right now (a reader, which must see them), instead of skipping them (a worker).
 */
export async function applyStaged(db: DbLike, wait: boolean): Promise<number> {
  const [row] = await run(db, applyStagedSql, [wait]);
  return row?.applied ?? 0;
}

// ---- redelivery and replay (redelivery.ts) ---------------------------------------------------
// Every statement that reads or writes deliveries has the caller's project in its WHERE, so
// another project's rows are not found.

/** A delivery starting a fresh cycle: pending, due now, no attempts, no lease. */
const AS_NEW = Prisma.sql`status = 'pending', attempts = 0, next_attempt_at = now(), completed_at = NULL, lease_until = NULL, leased_by = NULL`;

/** Wakes the workers now rather than at their next poll. */
export const wakeWorkersStatement = (): Prisma.Sql => Prisma.sql`SELECT pg_notify(${DELIVERY_CHANNEL}, '')`;

/**
 * Resets one delivery to a fresh cycle unless a worker holds it (pending, under a live lease):
 * resetting it under the worker would send it twice. Returns it as reset, or no row.
 */
export const redeliverStatement = (projectId: string, deliveryId: string): Prisma.Sql => Prisma.sql`
    UPDATE deliveries SET ${AS_NEW}
    WHERE id = ${deliveryId} AND project_id = ${projectId}
      AND (status <> 'pending' OR ${Prisma.raw(leaseFree("deliveries"))})
    RETURNING id, event_id, webhook_id, event_type, status::text AS status, attempts, next_attempt_at, false AS in_flight`;

/** One delivery as it is, held by a worker (what redeliver answers when redeliverStatement reset nothing). */
export const heldDeliveryStatement = (projectId: string, deliveryId: string): Prisma.Sql => Prisma.sql`
    SELECT id, event_id, webhook_id, event_type, status::text AS status, attempts, next_attempt_at, true AS in_flight
    FROM deliveries WHERE id = ${deliveryId} AND project_id = ${projectId}`;

/** The failed deliveries of one webhook since a time, which a replay resets (src/delivery/redelivery.ts). */
export type ReplayTarget = { webhookId: string; projectId: string; since: Date };

/** Where a replay has got to: the (created_at, id) of the last delivery it looked at. */
export type ReplayCursor = { createdAt: string; id: string };

/** How many deliveries a replay would reset: the webhook's failed ones created since `t.since`. */
export const countReplayableStatement = (t: ReplayTarget): Prisma.Sql => Prisma.sql`
    SELECT count(*)::int AS n FROM deliveries
    WHERE webhook_id = ${t.webhookId} AND project_id = ${t.projectId} AND status = 'failed'
      AND created_at >= ${t.since.toISOString()}::timestamptz`;

/**
 * Resets the next `size` failed deliveries after `after`, walking the (webhook_id, created_at)
 * index in (created_at, id) order; returns how many it reset and the last one it looked at (no
 * row when none was left). The cursor makes the walk finish even if a delivery fails again while
 * the replay runs; created_at travels as text so no time zone conversion can move it.
 */
export const replayBatchStatement = (t: ReplayTarget, after: ReplayCursor, size: number): Prisma.Sql => Prisma.sql`
    WITH batch AS (
      SELECT id, created_at FROM deliveries
      WHERE webhook_id = ${t.webhookId} AND project_id = ${t.projectId} AND status = 'failed'
        AND created_at >= ${t.since.toISOString()}::timestamptz
        AND (created_at, id) > (${after.createdAt}::timestamp, ${after.id})
      ORDER BY created_at, id
      LIMIT ${size}
    ),
    replayed AS (
      UPDATE deliveries d SET ${AS_NEW}
      FROM batch
      WHERE d.id = batch.id AND d.status = 'failed'
      RETURNING d.id
    )
    SELECT (SELECT count(*) FROM replayed)::int AS replayed, last.created_at::text AS created_at, last.id
    FROM (SELECT created_at, id FROM batch ORDER BY created_at DESC, id DESC LIMIT 1) last`;

// ---- the dashboard's charts (charts.ts) ------------------------------------------------------

/** Latency histograms have 128 buckets (dashboard-rollups.sql): 0 ms, then 9 % wider each. */
const BUCKETS = 128;
const PER_DOUBLING = 8;

/** One row of chartStatement: an interval (`start`), or the totals of them all (`start` null). */
export type ChartRow = { start: Date | null; succeeded: number; retried: number; failed: number; p50: number | null; p95: number | null };

/**
 * A chart of `points` intervals of `stepHours` each, read from the hourly rollups: of one webhook
 * (`webhookId`) or of the whole project (null), the project in the WHERE either way. Interval
 * starts align to UTC multiples of the step; the last interval holds now. Percentiles come from
 * the summed histogram: the bucket where the rank falls, interpolated geometrically within it
 * (so within one bucket's width, 9 %, of the exact value).
 */
export function chartStatement(projectId: string, webhookId: string | null, points: number, stepHours: number): Prisma.Sql {
  const step = `${stepHours} hours`;
  const source = webhookId
    ? Prisma.sql`dashboard.webhook_hours h WHERE h.webhook_id = ${webhookId} AND h.project_id = ${projectId}`
    : Prisma.sql`dashboard.project_hours h WHERE h.project_id = ${projectId}`;
  return Prisma.sql`
    WITH bounds AS (
      SELECT date_bin(${step}::interval, now(), timestamptz '2000-01-01 00:00:00+00') - ${points - 1}::int * ${step}::interval AS first,
             ${step}::interval AS step
    ), hours AS (
      SELECT date_bin(b.step, h.hour, b.first) AS start, h.succeeded, h.retried, h.failed, h.latency
      FROM bounds b, ${source} AND h.hour >= b.first AND h.hour < b.first + ${points}::int * b.step
    ), counts AS (
      SELECT start, sum(succeeded)::int AS succeeded, sum(retried)::int AS retried, sum(failed)::int AS failed
      FROM hours GROUP BY GROUPING SETS ((start), ())
    ), buckets AS (
      SELECT start, k - 1 AS k, sum(n)::float8 AS n
      FROM hours, unnest(latency) WITH ORDINALITY AS u(n, k) WHERE n > 0
      GROUP BY GROUPING SETS ((start, k), (k))
    ), cumulative AS (
      SELECT start, k, n, sum(n) OVER (PARTITION BY start ORDER BY k) AS upto, sum(n) OVER (PARTITION BY start) AS total
      FROM buckets
    ), quantiles AS (
      SELECT DISTINCT ON (c.start, q.q) c.start, q.q,
             CASE WHEN c.k = 0 THEN 0
                  WHEN c.k = ${BUCKETS - 1} THEN 2 ^ ((c.k - 1) / ${PER_DOUBLING}::float8)
                  ELSE 2 ^ ((c.k - 1 + (q.q * c.total - (c.upto - c.n)) / c.n) / ${PER_DOUBLING}::float8) END AS ms
      FROM cumulative c CROSS JOIN (VALUES (0.5::float8), (0.95::float8)) AS q(q)
      WHERE c.upto >= q.q * c.total
      ORDER BY c.start, q.q, c.k
    ), starts AS (
      SELECT generate_series(b.first, b.first + ${points - 1}::int * b.step, b.step) AS start FROM bounds b
      UNION ALL SELECT NULL
    )
    SELECT s.start, coalesce(c.succeeded, 0) AS succeeded, coalesce(c.retried, 0) AS retried, coalesce(c.failed, 0) AS failed,
           round(p50.ms)::int AS p50, round(p95.ms)::int AS p95
    FROM starts s
    LEFT JOIN counts c ON c.start IS NOT DISTINCT FROM s.start
    LEFT JOIN quantiles p50 ON p50.start IS NOT DISTINCT FROM s.start AND p50.q = 0.5
    LEFT JOIN quantiles p95 ON p95.start IS NOT DISTINCT FROM s.start AND p95.q = 0.95
    ORDER BY s.start NULLS LAST`;
}
