// What "pending" and "leased" mean in SQL, written once for every statement that reads the
// backlog: the claim (sql.ts), the /metrics backlog gauges (backlogStatement below, read by
// src/metrics.ts), the webhook list's counts (charts.ts), and the statements that must not
// touch a delivery a worker holds (redelivery.ts). Fragments are plain text, so both
// the prepared statements of the fast path (src/db/fast.ts, SQL text) and Prisma.sql statements
// (through Prisma.raw) embed them; none takes a value, so none can carry user input.
import type { Db } from "../db/client.ts";
import { Prisma } from "../generated/prisma/client.ts";
import type { BacklogGauges } from "../metrics.ts";

/**
 * `hooks(webhook_id)`, the webhooks that have pending deliveries, as a loose index scan: a
 * recursive CTE that jumps from one webhook_id to the next in the partial index
 * `deliveries_webhook_due_idx` (pending rows by webhook, then next_attempt_at), one index probe
 * per such webhook, not one row per pending delivery. Its cost follows the number of webhooks
 * with work, never the backlog. Goes after `WITH RECURSIVE`.
 */
export const PENDING_WEBHOOKS = `hooks(webhook_id) AS (
  (SELECT webhook_id FROM deliveries WHERE status = 'pending' ORDER BY webhook_id LIMIT 1)
  UNION ALL
  SELECT (SELECT d.webhook_id FROM deliveries d
          WHERE d.status = 'pending' AND d.webhook_id > h.webhook_id
          ORDER BY d.webhook_id LIMIT 1)
  FROM hooks h
  WHERE h.webhook_id IS NOT NULL
)`;

/**
 * A delivery (row alias `d`) that no live lease holds: never leased, released, or its lease ran
 * out (its worker died). What a claim may take; what the backlog counts as waiting, not in flight;
 * what a redelivery may reset. A lease writes
 * lease_until and leased_by together (sql.ts), so lease_until alone tells.
 */
export const leaseFree = (d: string) => `(${d}.lease_until IS NULL OR ${d}.lease_until <= now())`;

/**
 * Up to this many pending deliveries a count is exact, and it stops there: the /metrics gauge
 * then reports Postgres' estimate, the webhook list says "more than". Counting is linear in the
 * backlog (a million index entries take longer than a scrape or a page should), and an
 * operator needs the exact figure when it is small, the order of magnitude when it is large.
 */
export const PENDING_COUNTED_UP_TO = 10_000;

/**
 * At most this many leases are counted per webhook. The claim leases a webhook's first `cap`
 * due deliveries (20 by default; across simultaneous claims at most workers × cap).
 */
export const LEASES_COUNTED_PER_WEBHOOK = 1_000;

/** One row of backlogStatement. */
export type BacklogRow = {
  pending_counted: number;
  pending_estimate: number | null;
  oldest_due_seconds: number | null;
  leases_held: number;
  disabled_by_project: number;
  disabled_by_failures: number;
};

/**
 * The backlog of /metrics in one statement (readBacklog below runs it; the benchmark
 * EXPLAINs it), each part bounded whatever the number of pending rows. Everything is read
 * through the partial index deliveries_webhook_due_idx, as the claim reads it (sql.ts):
 * * hooks: PENDING_WEBHOOKS, the claim's loose index scan.
 * * heads: per webhook, its first delivery in due order that no live lease holds, i.e. the one
 *   that has waited longest. A claimed delivery keeps its place at the head of the due range
 *   until its result is recorded, so the scan steps over that webhook's leases (a lease is only
 *   lease_until/leased_by, in no index: each is one row read) and stops at the first free row.
 * * leases: the rows before that first free one (index entries only), at most
 *   LEASES_COUNTED_PER_WEBHOOK per webhook. Not counted: a lease behind a free row (for a
 *   moment, while a crashed worker's expired leases are taken over) or due at the very same
 *   instant as the first free row (deliveries made due by one statement, e.g. a replay).
 * * oldest due: now() minus the earliest first free row that is due, over enabled webhooks:
 *   a disabled webhook's deliveries wait on purpose and would read as a stuck worker.
 * * pending: counts at most PENDING_COUNTED_UP_TO + 1 index entries; past that, the index's
 *   number of entries as last measured by (auto)vacuum or analyze (pg_class.reltuples).
 * * disabled webhooks: the webhooks table (a row per webhook). "project": turned off by the
 *   project (src/webhooks/service.ts writes that reason); "failures": any other reason, i.e.
 *   disabled by the delivery engine after a day of failures.
 */
export function backlogStatement(): Prisma.Sql {
  return Prisma.sql`
    WITH RECURSIVE ${Prisma.raw(PENDING_WEBHOOKS)},
    heads AS MATERIALIZED (
      SELECT h.webhook_id, w.enabled,
             (SELECT d.next_attempt_at FROM deliveries d
              WHERE d.webhook_id = h.webhook_id AND d.status = 'pending'
                AND ${Prisma.raw(leaseFree("d"))}
              ORDER BY d.next_attempt_at LIMIT 1) AS first_free_at
      FROM hooks h
      JOIN webhooks w ON w.id = h.webhook_id
    )
    SELECT
      (SELECT count(*)::int FROM (SELECT 1 FROM deliveries WHERE status = 'pending' LIMIT ${PENDING_COUNTED_UP_TO + 1}::int) p) AS pending_counted,
      (SELECT c.reltuples::float8 FROM pg_class c
       WHERE c.oid = to_regclass(quote_ident(current_schema()) || '.deliveries_webhook_due_idx')) AS pending_estimate,
      (SELECT extract(epoch FROM now() - min(first_free_at))::float8 FROM heads
       WHERE enabled AND first_free_at <= now()) AS oldest_due_seconds,
      (SELECT coalesce(sum(l.n), 0)::int FROM heads
       CROSS JOIN LATERAL (
         SELECT count(*)::int AS n FROM (
           SELECT 1 FROM deliveries d
           WHERE d.webhook_id = heads.webhook_id AND d.status = 'pending'
             AND d.next_attempt_at < coalesce(heads.first_free_at, 'infinity')
           LIMIT ${LEASES_COUNTED_PER_WEBHOOK}::int) held) l) AS leases_held,
      (SELECT count(*)::int FROM webhooks WHERE NOT enabled AND disabled_reason IS NOT DISTINCT FROM 'disabled by the project') AS disabled_by_project,
      (SELECT count(*)::int FROM webhooks WHERE NOT enabled AND disabled_reason IS DISTINCT FROM 'disabled by the project') AS disabled_by_failures`;
}

/**
 * Runs backlogStatement with plans that do not depend on statistics. Every part of it is meant
 * to be an ordered index scan that stops early; with missing or stale statistics (a big batch
 * written since the last analyze) Postgres may instead bitmap-scan a whole webhook's range and
 * sort it: measured 3 to 4 s instead of about 10 ms with 1,000,000 pending (bench/metrics-scrape.ts). Bitmap
 * scans and sequential scans are ruled out for this transaction only, and a scrape that still
 * runs long is cut off rather than piling up behind the next one.
 */
export async function withIndexPlans<T>(db: Db, query: Prisma.PrismaPromise<T>): Promise<T> {
  const [, , , result] = await db.$transaction([
    db.$executeRaw`SET LOCAL enable_bitmapscan = off`,
    db.$executeRaw`SET LOCAL enable_seqscan = off`,
    db.$executeRaw`SET LOCAL statement_timeout = '5s'`,
    query,
  ]);
  return result;
}

export async function readBacklog(db: Db): Promise<BacklogGauges> {
  const [row] = await withIndexPlans(db, db.$queryRaw<BacklogRow[]>(backlogStatement()));
  const counted = Number(row!.pending_counted);
  const pendingEstimated = counted > PENDING_COUNTED_UP_TO;
  return {
    pending: pendingEstimated ? Math.max(counted, Math.round(Number(row!.pending_estimate ?? 0))) : counted,
    exactUpTo: PENDING_COUNTED_UP_TO,
    pendingEstimated,
    oldestDueSeconds: Math.max(0, Number(row!.oldest_due_seconds ?? 0)),
    leasesHeld: Number(row!.leases_held),
    disabledWebhooks: { project: Number(row!.disabled_by_project), failures: Number(row!.disabled_by_failures) },
  };
}
