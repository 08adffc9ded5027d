// Prometheus metrics (prom-client), one registry per app so tests and processes never share
// counters. The delivery engine reports through recordDelivery(); scrape-time gauges (pending
// deliveries, oldest due, leases, disabled webhooks) are read from the database when scraped.
// Filled in by the metrics work; the delivery hooks exist now so the worker can call them.
import { Counter, Histogram, Registry } from "prom-client";

export type DeliveryOutcome = "succeeded" | "failed" | "retried" | "gone";

export type Metrics = {
  registry: Registry;
  deliveries: Counter<"outcome">;
  deliveryLatency: Histogram<string>;
};

export function createMetrics(): Metrics {
  const registry = new Registry();
  return {
    registry,
    deliveries: new Counter({ name: "linkgate_deliveries_total", help: "delivery attempts by outcome", labelNames: ["outcome"], registers: [registry] }),
    deliveryLatency: new Histogram({
      name: "linkgate_delivery_latency_seconds",
      help: "from the event's commit to the receiver's 2xx",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800],
      registers: [registry],
    }),
  };
}

/** The process's metrics; the worker and the app both report here. */
export const metrics: Metrics = createMetrics();

/** One attempt's outcome; `latencyMs` (commit → 2xx) only for a success. */
export function recordDelivery(outcome: DeliveryOutcome, latencyMs?: number): void {
  metrics.deliveries.inc({ outcome });
  if (outcome === "succeeded" && latencyMs !== undefined) metrics.deliveryLatency.observe(latencyMs / 1000);
}
