// Delivery charts: per interval, the attempts that succeeded, were retried or failed for good,
// and the p50 / p95 latency of the successful ones, for one webhook or a whole project.
//
// Read from the hourly rollups of the dashboard schema (src/delivery/dashboard-rollups.sql), which
// a trigger keeps as attempts are logged: a chart reads at most 168 rows an hour-scope, however
// long the delivery log is. scripts/measure-charts.ts compares this with aggregating the log.
//
// Both readers take the caller as an actor: only the project's secret key reads them (the
// dashboard's, docs/webhooks.md), and its project is in every WHERE clause.
import type { Database } from "../db/client.ts";
import { Prisma } from "../generated/prisma/client.ts";
import { requireSecretKey, type KeyActor } from "../deps.ts";
import { PENDING_COUNTED_UP_TO } from "./pending.ts";
import { applyStaged, chartStatement, type ChartRow } from "./sql.ts";

type DbLike = Pick<Database, "prisma" | "driver">;

/**
 * The worker stages each record statement's numbers and adds them to the rollups about once a
 * second (dashboard.apply_staged, src/delivery/dashboard-states.sql): a read adds what is still
 * staged first, so it counts every attempt and state recorded before it asked.
 */
async function catchUp(db: DbLike): Promise<void> {
  while ((await applyStaged(db, true)) === STAGED_PER_APPLY);
}
const STAGED_PER_APPLY = 500;

export type ChartRange = "day" | "week";

/** Hourly points over the last 24 hours; six-hour points over the last 7 days (UTC boundaries). */
export const CHART_RANGES: Record<ChartRange, { points: number; stepHours: number }> = {
  day: { points: 24, stepHours: 1 },
  week: { points: 28, stepHours: 6 },
};

export type ChartCounts = {
  /** attempts answered 200, 201 or 202 */
  succeeded: number;
  /** failed attempts after which another was scheduled */
  retried: number;
  /** failed attempts after which the delivery gave up (schedule used up, or 410) */
  failed: number;
  /** latency of the successful attempts, in ms; null when there were none */
  p50Ms: number | null;
  p95Ms: number | null;
};

export type ChartPoint = ChartCounts & { start: Date; end: Date };

export type DeliveryChart = {
  range: ChartRange;
  stepSeconds: number;
  /** the first point's start and the last point's end (the last point is the current interval) */
  from: Date;
  to: Date;
  points: ChartPoint[];
  totals: ChartCounts;
};

/** The chart of one webhook (`webhookId`) or of the whole project (null), the actor's project in the WHERE either way. */
export async function deliveryChart(db: DbLike, actor: KeyActor, range: ChartRange, webhookId: string | null): Promise<DeliveryChart> {
  const { projectId } = requireSecretKey(actor);
  await catchUp(db);
  const { points, stepHours } = CHART_RANGES[range];
  const rows = await db.prisma.$queryRaw<ChartRow[]>(chartStatement(projectId, webhookId, points, stepHours));
  return chartOf(range, stepHours, rows);
}

/** The chart of chartStatement's rows: one per interval in order, then the totals (start null). */
function chartOf(range: ChartRange, stepHours: number, rows: ChartRow[]): DeliveryChart {
  const stepMs = stepHours * 3600_000;
  const counts = (r: ChartRow): ChartCounts => ({
    succeeded: Number(r.succeeded),
    retried: Number(r.retried),
    failed: Number(r.failed),
    p50Ms: r.p50 === null ? null : Number(r.p50),
    p95Ms: r.p95 === null ? null : Number(r.p95),
  });
  const series = rows.filter((r) => r.start !== null).map((r) => ({ ...counts(r), start: r.start!, end: new Date(r.start!.getTime() + stepMs) }));
  return {
    range,
    stepSeconds: stepHours * 3600,
    from: series[0].start,
    to: series[series.length - 1].end,
    points: series,
    totals: counts(rows.find((r) => r.start === null)!),
  };
}

// ---- the webhook list's stats ------------------------------------------------------------------

export type WebhookStats = {
  /** Deliveries created in the last 24 hours, by state. */
  windowHours: 24;
  succeeded: number;
  failed: number;
  gone: number;
  /** At most PENDING_COUNT_LIMIT: the count stops there (pendingCapped). */
  pending: number;
  /** True when there are more pending deliveries than `pending` says. */
  pendingCapped: boolean;
  /** succeeded / (succeeded + failed + gone) over the window; null when none finished. */
  successRate: number | null;
  /** When the most recent successful delivery completed (any time, not only in the window). */
  lastSuccessAt: Date | null;
};

/**
 * The stats of many webhooks of one project (see WebhookStats: deliveries created in the last 24
 * hours, each once by its state, and the newest success of any time), in one statement. Finished
 * deliveries of the window's whole hours come from dashboard.webhook_delivery_hours (kept by
 * triggers on deliveries), those of its oldest, partial hour from deliveries itself, so the
 * counts are exactly those of the window while reading at most an hour of deliveries. Pending
 * ones are counted here, from deliveries_pending_created_idx: counting them at every enqueue
 * doubled the time of an event's commit (migration 20261123120000), and a webhook's pending
 * deliveries are the few in flight unless its receiver is failing. A failing receiver can leave
 * millions pending, so the count stops at PENDING_COUNT_LIMIT per webhook (as the pending gauge of
 * /metrics does): one request reads at most that many index entries per webhook of its page.
 * The newest success is the latest of dashboard.webhook_last_success (kept as the workers'
 * numbers are applied: a delivery created days ago, replayed, can succeed after every newer
 * one), the hours' and, among the webhook's latest LEGACY_SUCCESS_LOOKBACK deliveries, the newest
 * success, which cover what succeeded before that table.
 * Ids of other projects than the actor's, or of no webhook, get empty stats.
 */
export const PENDING_COUNT_LIMIT = PENDING_COUNTED_UP_TO;

export async function webhooksStats(db: DbLike, actor: KeyActor, webhookIds: readonly string[]): Promise<Map<string, WebhookStats>> {
  const { projectId } = requireSecretKey(actor);
  const ids = [...new Set(webhookIds)];
  if (ids.length === 0) return new Map();
  await catchUp(db);
  const rows = await db.prisma.$queryRaw<StatsRow[]>(webhooksStatsStatement(projectId, ids));
  const found = new Map(rows.map((r) => [r.id, statsOf(r)]));
  return new Map(ids.map((id) => [id, found.get(id) ?? statsOf(NONE)]));
}

/**
 * How many of a webhook's newest deliveries the stats look through for a success that
 * dashboard.webhook_last_success does not hold: one recorded before that table existed
 * (migration 20261130200000_webhook_last_success), or by a worker of the build before it. Every
 * success recorded since is in that table. Unbounded, the look went through every delivery of
 * a webhook that never succeeded (a dead endpoint's whole log, 30 days of its events), for each
 * webhook of each page of the list, where docs/graphql.md promises a read of a 24-hour window.
 */
export const LEGACY_SUCCESS_LOOKBACK = 1_000;

/** webhooksStats' statement: one row per webhook of `ids` in `projectId` (exported for the read-bound test). */
export function webhooksStatsStatement(projectId: string, ids: string[]): Prisma.Sql {
  return Prisma.sql`
    WITH bounds AS (
      SELECT now() - interval '24 hours' AS since, date_trunc('hour', now() - interval '24 hours') + interval '1 hour' AS whole
    ), hooks AS (
      SELECT w.id FROM webhooks w WHERE w.id = ANY (${ids}::text[]) AND w.project_id = ${projectId}
    )
    SELECT h.id,
           (coalesce(r.succeeded, 0) + e.succeeded)::int AS succeeded, (coalesce(r.failed, 0) + e.failed)::int AS failed,
           (coalesce(r.gone, 0) + e.gone)::int AS gone, p.pending::int AS pending,
           greatest(r.last_ok, e.last_ok, newest.completed_at, ls.at) AS last_ok
    FROM hooks h CROSS JOIN bounds b
    LEFT JOIN LATERAL (
      SELECT sum(succeeded) AS succeeded, sum(failed) AS failed, sum(gone) AS gone, max(last_ok) AS last_ok
      FROM dashboard.webhook_delivery_hours s WHERE s.webhook_id = h.id AND s.hour >= b.whole
    ) r ON true
    CROSS JOIN LATERAL (
      SELECT count(*) FILTER (WHERE status = 'succeeded') AS succeeded, count(*) FILTER (WHERE status = 'failed') AS failed,
             count(*) FILTER (WHERE status = 'gone') AS gone, max(completed_at) FILTER (WHERE status = 'succeeded') AS last_ok
      FROM deliveries d WHERE d.webhook_id = h.id AND d.created_at >= b.since AND d.created_at < b.whole
    ) e
    CROSS JOIN LATERAL (
      SELECT count(*) AS pending FROM (
        SELECT 1 FROM deliveries d WHERE d.webhook_id = h.id AND d.status = 'pending' AND d.created_at >= b.since
        LIMIT ${PENDING_COUNT_LIMIT + 1}
      ) l
    ) p
    LEFT JOIN LATERAL (
      -- newest first, so a webhook that succeeds is answered at its latest success, a few rows in
      SELECT l.completed_at FROM (
        SELECT d.status, d.completed_at, d.created_at FROM deliveries d
        WHERE d.webhook_id = h.id
        ORDER BY d.created_at DESC LIMIT ${LEGACY_SUCCESS_LOOKBACK}
      ) l
      WHERE l.status = 'succeeded'
      ORDER BY l.created_at DESC LIMIT 1
    ) newest ON true
    LEFT JOIN dashboard.webhook_last_success ls ON ls.webhook_id = h.id`;
}

type StatsRow = { id: string; succeeded: number; failed: number; gone: number; pending: number; last_ok: Date | null };
const NONE: StatsRow = { id: "", succeeded: 0, failed: 0, gone: 0, pending: 0, last_ok: null };

function statsOf(counts: StatsRow): WebhookStats {
  const finished = counts.succeeded + counts.failed + counts.gone;
  return {
    windowHours: 24,
    succeeded: counts.succeeded,
    failed: counts.failed,
    gone: counts.gone,
    pending: Math.min(counts.pending, PENDING_COUNT_LIMIT),
    pendingCapped: counts.pending > PENDING_COUNT_LIMIT,
    successRate: finished === 0 ? null : counts.succeeded / finished,
    lastSuccessAt: counts.last_ok,
  };
}
