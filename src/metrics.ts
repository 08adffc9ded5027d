// Prometheus metrics (prom-client) in one process-wide registry: the HTTP layer, GraphQL, the
// OTP flow and the delivery engine (through recordDelivery) all count here, and a process
// serves one app. Tests that build several apps in one process read differences, never
// absolute values. Gauges about the backlog (pending deliveries, the oldest due, leases,
// disabled webhooks) are not kept in memory: they are read from the database at each scrape
// (readBacklog), so every process reports the same shared state.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { Db } from "./db/client.ts";
import { Prisma } from "./generated/prisma/client.ts";

export type DeliveryOutcome = "succeeded" | "failed" | "retried" | "gone";
export type OtpChannel = "email" | "phone";
export type GraphQLOutcome = "ok" | "error" | "refused";

/** The abuse limits that can refuse a request (docs/security.md), as labels. */
export const RATE_LIMITS = [
  "sends_per_identifier_address",
  "sends_per_address",
  "sends_per_account",
  "sms_per_project",
  "emails_per_project",
  "wrong_codes_per_identifier_address",
  "wrong_codes_per_account",
  "wrong_codes_per_identifier",
  "notices_per_destination",
  "notices_per_account",
  "sign_in_options_per_address",
  "provider_pages_per_address",
] as const;
export type RateLimitName = (typeof RATE_LIMITS)[number];

const DELIVERY_OUTCOMES: DeliveryOutcome[] = ["succeeded", "failed", "retried", "gone"];
const OTP_CHANNELS: OtpChannel[] = ["email", "phone"];

export type Metrics = {
  registry: Registry;
  httpRequests: Counter<"method" | "route" | "status">;
  httpDuration: Histogram<"method" | "route">;
  graphqlOperations: Counter<"operation" | "outcome">;
  otpSends: Counter<"channel">;
  rateLimitRefusals: Counter<"limit">;
  deliveries: Counter<"outcome">;
  deliveryLatency: Histogram<string>;
};

export function createMetrics(): Metrics {
  const registry = new Registry();
  const registers = [registry];
  const m: Metrics = {
    registry,
    httpRequests: new Counter({
      name: "linkgate_http_requests_total",
      help: "HTTP requests by method, matched route pattern (\"unmatched\" when no route answered) and status",
      labelNames: ["method", "route", "status"],
      registers,
    }),
    httpDuration: new Histogram({
      name: "linkgate_http_request_duration_seconds",
      help: "HTTP request latency, from the first middleware to the response, by method and route pattern",
      labelNames: ["method", "route"],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    graphqlOperations: new Counter({
      name: "linkgate_graphql_operations_total",
      help: "GraphQL operations by operation name and outcome (ok, error: ran and failed, refused: turned away before or for credentials/input)",
      labelNames: ["operation", "outcome"],
      registers,
    }),
    otpSends: new Counter({ name: "linkgate_otp_sends_total", help: "one-time codes sent, by channel", labelNames: ["channel"], registers }),
    rateLimitRefusals: new Counter({
      name: "linkgate_rate_limit_refusals_total",
      help: "requests refused by an abuse limit, by limit (a request over several limits counts under each)",
      labelNames: ["limit"],
      registers,
    }),
    deliveries: new Counter({ name: "linkgate_deliveries_total", help: "delivery attempts by outcome", labelNames: ["outcome"], registers }),
    deliveryLatency: new Histogram({
      name: "linkgate_delivery_latency_seconds",
      help: "from the event's commit to the receiver's 2xx",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800],
      registers,
    }),
  };
  // Every series of a closed label set exists from the start at 0, so rate() and ratios work
  // from the first scrape instead of appearing with the first event.
  for (const outcome of DELIVERY_OUTCOMES) m.deliveries.inc({ outcome }, 0);
  for (const channel of OTP_CHANNELS) m.otpSends.inc({ channel }, 0);
  for (const limit of RATE_LIMITS) m.rateLimitRefusals.inc({ limit }, 0);
  collectDefaultMetrics({ register: registry });
  return m;
}

/** The process's metrics; the worker and the app both report here. */
export const metrics: Metrics = createMetrics();

/** One attempt's outcome; `latencyMs` (commit → 2xx) only for a success. */
export function recordDelivery(outcome: DeliveryOutcome, latencyMs?: number): void {
  metrics.deliveries.inc({ outcome });
  if (outcome === "succeeded" && latencyMs !== undefined) metrics.deliveryLatency.observe(latencyMs / 1000);
}

export function recordOtpSend(channel: OtpChannel): void {
  metrics.otpSends.inc({ channel });
}

export function recordRateLimitRefusal(limit: RateLimitName): void {
  metrics.rateLimitRefusals.inc({ limit });
}

/**
 * Up to this many pending deliveries the gauge is an exact count; above it, Postgres' own
 * estimate. Counting is linear in the backlog (a million index entries take longer than
 * a scrape should), and an operator needs the exact figure when it is small, the order of
 * magnitude when it is large.
 */
export const PENDING_EXACT_UP_TO = 10_000;

/**
 * At most this many leases are counted per webhook. The claim leases a webhook's first `cap`
 * due deliveries (20 by default; across simultaneous claims at most workers × cap).
 */
export const LEASES_COUNTED_PER_WEBHOOK = 1_000;

export type BacklogGauges = {
  pending: number;
  pendingEstimated: boolean;
  oldestDueSeconds: number;
  leasesHeld: number;
  disabledWebhooks: { project: number; failures: number };
};

type BacklogRow = {
  pending_counted: number;
  pending_estimate: number | null;
  oldest_due_seconds: number | null;
  leases_held: number;
  disabled_by_project: number;
  disabled_by_failures: number;
};

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
  const pendingEstimated = counted > PENDING_EXACT_UP_TO;
  return {
    pending: pendingEstimated ? Math.max(counted, Math.round(Number(row!.pending_estimate ?? 0))) : counted,
    pendingEstimated,
    oldestDueSeconds: Math.max(0, Number(row!.oldest_due_seconds ?? 0)),
    leasesHeld: Number(row!.leases_held),
    disabledWebhooks: { project: Number(row!.disabled_by_project), failures: Number(row!.disabled_by_failures) },
  };
}

/**
 * The backlog in one statement (exported so the benchmark can EXPLAIN it), each part bounded
 * whatever the number of pending rows. Everything is read through the partial index
 * deliveries_webhook_due_idx (pending rows by webhook, then next_attempt_at), as the claim
 * reads it (src/delivery/sql.ts):
 * * hooks: the claim's loose index scan, one probe per webhook that has pending deliveries.
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
 * * pending: counts at most PENDING_EXACT_UP_TO + 1 index entries; past that, the index's
 *   number of entries as last measured by (auto)vacuum or analyze (pg_class.reltuples).
 * * disabled webhooks: the webhooks table (a row per webhook). "project": turned off by the
 *   project (src/webhooks/service.ts writes that reason); "failures": any other reason, i.e.
 *   disabled by the delivery engine after a day of failures.
 */
export function backlogStatement(): Prisma.Sql {
  return Prisma.sql`
    WITH RECURSIVE hooks(webhook_id) AS (
      (SELECT webhook_id FROM deliveries WHERE status = 'pending' ORDER BY webhook_id LIMIT 1)
      UNION ALL
      SELECT (SELECT d.webhook_id FROM deliveries d
              WHERE d.status = 'pending' AND d.webhook_id > h.webhook_id
              ORDER BY d.webhook_id LIMIT 1)
      FROM hooks h
      WHERE h.webhook_id IS NOT NULL
    ),
    heads AS MATERIALIZED (
      SELECT h.webhook_id, w.enabled,
             (SELECT d.next_attempt_at FROM deliveries d
              WHERE d.webhook_id = h.webhook_id AND d.status = 'pending'
                AND (d.lease_until IS NULL OR d.lease_until <= now())
              ORDER BY d.next_attempt_at LIMIT 1) AS first_free_at
      FROM hooks h
      JOIN webhooks w ON w.id = h.webhook_id
    )
    SELECT
      (SELECT count(*)::int FROM (SELECT 1 FROM deliveries WHERE status = 'pending' LIMIT ${PENDING_EXACT_UP_TO + 1}::int) p) AS pending_counted,
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

/** The backlog as a registry of its own, made per scrape (it holds only that scrape's values). */
function backlogRegistry(b: BacklogGauges | undefined): Registry {
  const registry = new Registry();
  const gauge = (name: string, help: string, labelNames: string[] = []) => new Gauge({ name, help, labelNames, registers: [registry] });
  gauge("linkgate_metrics_database_up", "1 when this scrape read the backlog gauges from the database, 0 when the database failed").set(b ? 1 : 0);
  if (!b) return registry;
  gauge("linkgate_deliveries_pending", `pending deliveries (exact up to ${PENDING_EXACT_UP_TO}, Postgres' estimate above)`).set(b.pending);
  gauge("linkgate_deliveries_pending_estimated", "1 when linkgate_deliveries_pending is an estimate").set(b.pendingEstimated ? 1 : 0);
  gauge(
    "linkgate_deliveries_oldest_due_age_seconds",
    "how long the longest-waiting due delivery of an enabled webhook has been due (0 when none is)",
  ).set(b.oldestDueSeconds);
  gauge("linkgate_delivery_leases_held", "pending deliveries leased to a worker right now (in flight)").set(b.leasesHeld);
  const disabled = gauge("linkgate_webhooks_disabled", "disabled webhooks, by who disabled them (project, failures)", ["reason"]);
  disabled.set({ reason: "project" }, b.disabledWebhooks.project);
  disabled.set({ reason: "failures" }, b.disabledWebhooks.failures);
  return registry;
}

export type Exposition = { contentType: string; body: string };

/**
 * The text exposition: the process's counters and the backlog read now. A database that
 * fails does not fail the scrape (the process's own metrics matter most during an outage):
 * linkgate_metrics_database_up says so, and the error goes to `onDatabaseError`.
 */
export async function renderMetrics(db: Db, onDatabaseError: (err: unknown) => void): Promise<Exposition> {
  const backlog = await readBacklog(db).catch((err: unknown) => {
    onDatabaseError(err);
    return undefined;
  });
  const body = (await metrics.registry.metrics()) + (await backlogRegistry(backlog).metrics());
  return { contentType: metrics.registry.contentType, body };
}
