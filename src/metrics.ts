// Prometheus metrics (prom-client) in one process-wide registry: the HTTP layer, GraphQL, the
// OTP flow and the delivery engine (through recordDelivery) all count here, and a process
// serves one app. Tests that build several apps in one process read differences, never
// absolute values. Gauges about the backlog (pending deliveries, the oldest due, leases,
// disabled webhooks) are not kept in memory: they are read from the database at each scrape
// (readBacklog in src/delivery/pending.ts), so every process reports the same shared state.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";

export type DeliveryOutcome = "succeeded" | "failed" | "retried" | "gone";
export type OtpChannel = "email" | "phone";
export type GraphQLOutcome = "ok" | "error" | "refused";

/** The abuse limits that can refuse a request (docs/security.md), as labels. */
export const RATE_LIMITS = [
  "sends_per_identifier_address",
  "sends_per_identifier",
  "sends_per_address",
  "sends_per_account",
  "sends_per_session",
  "sms_per_project",
  "emails_per_project",
  "known_place_sends_per_identifier",
  "known_place_sms_per_project",
  "known_place_emails_per_project",
  "wrong_codes_per_identifier_address",
  "wrong_codes_per_account",
  "wrong_codes_per_session",
  "wrong_codes_per_identifier",
  "notices_per_destination",
  "notices_per_account",
  "notice_sms_per_project",
  "notice_emails_per_project",
  "sign_in_options_per_address",
  "provider_pages_per_address",
  "embedded_provider_pages_per_address",
  "external_flows_per_address",
  "registration_options_per_account",
  "profile_updates_per_account",
  "test_events_per_project",
  "redeliveries_per_project",
] as const;
export type RateLimitName = (typeof RATE_LIMITS)[number];

const DELIVERY_OUTCOMES: DeliveryOutcome[] = ["succeeded", "failed", "retried", "gone"];
const OTP_CHANNELS: OtpChannel[] = ["email", "phone"];
/** Why a code was not sent: the transport refused the recipient for good, or could not take it now. */
export type OtpFailure = "refused" | "unavailable";
const OTP_FAILURES: OtpFailure[] = ["refused", "unavailable"];

export type Metrics = {
  registry: Registry;
  httpRequests: Counter<"method" | "route" | "status">;
  httpDuration: Histogram<"method" | "route">;
  graphqlOperations: Counter<"operation" | "outcome">;
  otpSends: Counter<"channel">;
  otpSendFailures: Counter<"channel" | "reason">;
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
    otpSendFailures: new Counter({
      name: "linkgate_otp_send_failures_total",
      help: "one-time codes the transport did not take, by channel and reason (refused: the recipient, for good; unavailable: the transport)",
      labelNames: ["channel", "reason"],
      registers,
    }),
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
  for (const channel of OTP_CHANNELS) for (const reason of OTP_FAILURES) m.otpSendFailures.inc({ channel, reason }, 0);
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

/**
 * A code the transport did not take: with only one log line per request, a relay that refused
 * linkgate's password or went away was seen by users before operators (smtp review).
 */
export function recordOtpSendFailure(channel: OtpChannel, reason: OtpFailure): void {
  metrics.otpSendFailures.inc({ channel, reason });
}

export function recordRateLimitRefusal(limit: RateLimitName): void {
  metrics.rateLimitRefusals.inc({ limit });
}

/**
 * The backlog gauges one scrape shows, read from the database by src/delivery/pending.ts
 * (readBacklog): the metrics module renders them and holds no delivery SQL.
 */
export type BacklogGauges = {
  pending: number;
  /** the count is exact up to this many pending deliveries, Postgres' estimate above */
  exactUpTo: number;
  pendingEstimated: boolean;
  oldestDueSeconds: number;
  leasesHeld: number;
  disabledWebhooks: { project: number; failures: number };
};

/** The backlog as a registry of its own, made per scrape (it holds only that scrape's values). */
function backlogRegistry(b: BacklogGauges | undefined): Registry {
  const registry = new Registry();
  const gauge = (name: string, help: string, labelNames: string[] = []) => new Gauge({ name, help, labelNames, registers: [registry] });
  gauge("linkgate_metrics_database_up", "1 when this scrape read the backlog gauges from the database, 0 when the database failed").set(b ? 1 : 0);
  if (!b) return registry;
  gauge("linkgate_deliveries_pending", `pending deliveries (exact up to ${b.exactUpTo}, Postgres' estimate above)`).set(b.pending);
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
export async function renderMetrics(readBacklog: () => Promise<BacklogGauges>, onDatabaseError: (err: unknown) => void): Promise<Exposition> {
  const backlog = await readBacklog().catch((err: unknown) => {
    onDatabaseError(err);
    return undefined;
  });
  const body = (await metrics.registry.metrics()) + (await backlogRegistry(backlog).metrics());
  return { contentType: metrics.registry.contentType, body };
}
