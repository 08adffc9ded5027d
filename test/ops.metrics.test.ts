// /metrics: who may scrape it, and that its counters and gauges follow real traffic. The
// exposition is parsed with the text format's own line grammar (prom-client writes it but
// cannot read it). Counters live in one process-wide registry, so every check compares two
// scrapes; the backlog gauges come from each app's own database.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimDue } from "../src/delivery/sql.ts";
import { startWorker } from "../src/delivery/worker.ts";
import { MAX_OPERATION_NAMES } from "../src/graphql/metrics-plugin.ts";
import { GRAPHIQL_ASSET_BASE } from "../src/http/graphiql-assets.ts";
import { CreateWebhookDocument, SendTestWebhookDocument, UpdateWebhookDocument } from "./generated/operations.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";
import { eventually, TestReceiver } from "./support/receiver.ts";

// ---- the text exposition format, version 0.0.4 -------------------------------------------

type Sample = { name: string; labels: Record<string, string>; value: number };
type Exposition = { samples: Sample[]; types: Map<string, string>; helps: Set<string> };

const METRIC_NAME = /[a-zA-Z_:][a-zA-Z0-9_:]*/y;
const LABEL = /\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\\n]|\\[\\"n])*)"\s*(,|(?=\}))/y;

function unescapeLabel(v: string): string {
  return v.replace(/\\([\\"n])/g, (_, ch: string) => (ch === "n" ? "\n" : ch));
}

// Prometheus reads values with Go's ParseFloat, which takes NaN and Inf in any case (prom-client writes "Nan").
function parseValue(v: string): number {
  if (/^\+?inf(inity)?$/i.test(v)) return Infinity;
  if (/^-inf(inity)?$/i.test(v)) return -Infinity;
  if (/^nan$/i.test(v)) return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(v)) throw new Error(`not a sample value: ${v}`);
  return Number(v);
}

function parseSample(line: string): Sample {
  METRIC_NAME.lastIndex = 0;
  const name = METRIC_NAME.exec(line)?.[0];
  if (!name) throw new Error(`no metric name: ${line}`);
  let at = name.length;
  const labels: Record<string, string> = {};
  if (line[at] === "{") {
    at++;
    while (line[at] !== "}") {
      LABEL.lastIndex = at;
      const m = LABEL.exec(line);
      if (!m) throw new Error(`bad label set at ${at}: ${line}`);
      if (m[1]! in labels) throw new Error(`label ${m[1]} twice: ${line}`);
      labels[m[1]!] = unescapeLabel(m[2]!);
      at = LABEL.lastIndex;
    }
    at++;
  }
  const rest = line.slice(at).trim().split(/\s+/);
  if (rest.length < 1 || rest.length > 2 || (rest[1] !== undefined && !/^-?\d+$/.test(rest[1]))) throw new Error(`bad value/timestamp: ${line}`);
  return { name, labels, value: parseValue(rest[0]!) };
}

function parseExposition(text: string): Exposition {
  const out: Exposition = { samples: [], types: new Map(), helps: new Set() };
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const meta = /^#\s+(HELP|TYPE)\s+([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\s(.*))?$/.exec(line);
    if (meta) {
      if (meta[1] === "TYPE") {
        if (out.types.has(meta[2]!)) throw new Error(`TYPE twice for ${meta[2]}`);
        if (!["counter", "gauge", "histogram", "summary", "untyped"].includes(meta[3]!)) throw new Error(`bad type: ${line}`);
        out.types.set(meta[2]!, meta[3]!);
      } else out.helps.add(meta[2]!);
      continue;
    }
    if (line.startsWith("#")) continue;
    out.samples.push(parseSample(line));
  }
  return out;
}

/** The family a sample belongs to: a histogram's _bucket/_sum/_count and a counter's _total are its own family's. */
function familyOf(name: string, types: Map<string, string>): string | undefined {
  if (types.has(name)) return name;
  const base = name.replace(/_(bucket|sum|count|total|created)$/, "");
  return types.has(base) ? base : undefined;
}

const seriesKey = (s: Pick<Sample, "name" | "labels">) =>
  `${s.name}{${Object.entries(s.labels)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join(",")}}`;

class Scrape {
  constructor(readonly exposition: Exposition) {}

  /** The value of the one series with exactly these labels; 0 when it does not exist yet (counters start there). */
  get(name: string, labels: Record<string, string> = {}): number {
    const key = seriesKey({ name, labels });
    const found = this.exposition.samples.filter((s) => seriesKey(s) === key);
    if (found.length > 1) throw new Error(`${key} twice`);
    return found[0]?.value ?? 0;
  }

  has(name: string, labels: Record<string, string> = {}): boolean {
    const key = seriesKey({ name, labels });
    return this.exposition.samples.some((s) => seriesKey(s) === key);
  }

  labelValues(name: string, label: string): Set<string> {
    return new Set(this.exposition.samples.filter((s) => s.name === name && label in s.labels).map((s) => s.labels[label]!));
  }
}

async function scrape(h: Harness, init: { from?: string; headers?: Record<string, string> } = {}): Promise<Scrape> {
  const res = await h.app.fetch(
    new Request("http://linkgate.test/metrics", { headers: init.headers }),
    init.from ? { incoming: { socket: { remoteAddress: init.from } } } : undefined,
  );
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET /metrics: ${res.status} ${text}`);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return new Scrape(parseExposition(text));
}

const unique = () => randomBytes(4).toString("hex");

// ---- tests --------------------------------------------------------------------------------

describe.each(backends)("metrics on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    // retries 50 ms apart, so a failed attempt's retry comes at once
    h = await startHarness(backend, { env: { LINKGATE_WEBHOOK_RETRY_SCHEDULE_MS: "50,50,50,50,50" } });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("is valid exposition text: every series once, in a family with HELP and TYPE, every metric of the list present", async () => {
    const s = await scrape(h);
    const { samples, types, helps } = s.exposition;
    const keys = samples.map(seriesKey);
    expect(new Set(keys).size).toBe(keys.length);
    for (const sample of samples) {
      const family = familyOf(sample.name, types);
      expect(family, sample.name).toBeDefined();
      expect(helps.has(family!), `HELP for ${family}`).toBe(true);
    }
    const expected: Record<string, string> = {
      linkgate_http_requests_total: "counter",
      linkgate_http_request_duration_seconds: "histogram",
      linkgate_graphql_operations_total: "counter",
      linkgate_otp_sends_total: "counter",
      linkgate_otp_send_failures_total: "counter",
      linkgate_rate_limit_refusals_total: "counter",
      linkgate_deliveries_total: "counter",
      linkgate_delivery_latency_seconds: "histogram",
      linkgate_deliveries_pending: "gauge",
      linkgate_deliveries_pending_estimated: "gauge",
      linkgate_deliveries_oldest_due_age_seconds: "gauge",
      linkgate_delivery_leases_held: "gauge",
      linkgate_webhooks_disabled: "gauge",
      linkgate_metrics_database_up: "gauge",
    };
    for (const [name, type] of Object.entries(expected)) expect(types.get(name), name).toBe(type);
    expect(s.get("linkgate_metrics_database_up")).toBe(1);
    // closed label sets exist before their first event, so rate() works from the start
    for (const outcome of ["succeeded", "failed", "retried", "gone"]) expect(s.has("linkgate_deliveries_total", { outcome }), outcome).toBe(true);
    for (const channel of ["email", "phone"]) expect(s.has("linkgate_otp_sends_total", { channel }), channel).toBe(true);
    for (const channel of ["email", "phone"]) for (const reason of ["refused", "unavailable"]) expect(s.has("linkgate_otp_send_failures_total", { channel, reason })).toBe(true);
  });

  it("serves loopback clients without a token and refuses every other client", async () => {
    for (const from of ["127.0.0.1", "::1", "::ffff:127.0.0.1", "127.8.9.10"]) await scrape(h, { from });
    await scrape(h); // app.fetch without a socket: the process itself
    for (const from of ["203.0.113.5", "10.0.0.7", "::ffff:203.0.113.5", "2001:db8::1"]) {
      const res = await h.call("GET", "/metrics", { from });
      expect(res.status, from).toBe(403);
      expect(res.body).toEqual({ error: "Forbidden", message: expect.stringContaining("LINKGATE_METRICS_TOKEN") });
    }
    // with no trusted proxy, a forwarded-for header cannot make a remote client loopback
    const forged = await h.call("GET", "/metrics", { from: "203.0.113.5", headers: { "x-forwarded-for": "127.0.0.1" } });
    expect(forged.status).toBe(403);
  });

  it("counts HTTP requests under the route pattern that answered, with their latency", async () => {
    const before = await scrape(h);
    for (let i = 0; i < 3; i++) expect((await h.call("GET", "/healthz")).status).toBe(200);
    const raw = `/no/such/${unique()}`;
    expect((await h.call("GET", raw)).status).toBe(404);
    expect((await h.call("POST", `${raw}/again`)).status).toBe(404);
    expect((await h.call("PROPFIND", "/healthz")).status).toBe(404);
    const asset = `${GRAPHIQL_ASSET_BASE}missing-${unique()}.js`;
    expect((await h.call("GET", asset)).status).toBe(404);
    const bad = await h.call("POST", "/auth/otp/start", { body: {} });
    expect(bad.status).toBe(400);
    const after = await scrape(h);

    const delta = (name: string, labels: Record<string, string>) => after.get(name, labels) - before.get(name, labels);
    expect(delta("linkgate_http_requests_total", { method: "GET", route: "/healthz", status: "200" })).toBe(3);
    expect(delta("linkgate_http_request_duration_seconds_count", { method: "GET", route: "/healthz" })).toBe(3);
    expect(delta("linkgate_http_request_duration_seconds_bucket", { method: "GET", route: "/healthz", le: "+Inf" })).toBe(3);
    expect(delta("linkgate_http_request_duration_seconds_sum", { method: "GET", route: "/healthz" })).toBeGreaterThan(0);
    expect(delta("linkgate_http_requests_total", { method: "GET", route: "unmatched", status: "404" })).toBe(1);
    expect(delta("linkgate_http_requests_total", { method: "POST", route: "unmatched", status: "404" })).toBe(1);
    expect(delta("linkgate_http_requests_total", { method: "other", route: "unmatched", status: "404" })).toBe(1);
    // a route's own 404 stays under its pattern, never under the path asked for
    expect(delta("linkgate_http_requests_total", { method: "GET", route: `${GRAPHIQL_ASSET_BASE}:file`, status: "404" })).toBe(1);
    expect(delta("linkgate_http_requests_total", { method: "POST", route: "/auth/otp/start", status: "400" })).toBe(1);
    const routes = after.labelValues("linkgate_http_requests_total", "route");
    for (const r of routes) expect(r.includes(raw) || r.includes("missing-"), r).toBe(false);
  });

  it("counts GraphQL operations by name and outcome", async () => {
    const name = `MetricsProbe_${backend}`;
    const before = await scrape(h);
    for (let i = 0; i < 2; i++) expect((await h.gql(`query ${name} { __typename }`)).body.data).toEqual({ __typename: "Query" });
    const invalid = await h.gql(`query MetricsBroken { noSuchField }`); // never ran
    expect(invalid.body.errors[0].extensions.code).toBe("GRAPHQL_VALIDATION_FAILED");
    const unauthenticated = await h.gql(`query MetricsViewer { viewer { id } }`); // needs a user's token
    expect(unauthenticated.body.errors[0].extensions.code).toBe("UNAUTHENTICATED");
    expect((await h.gql(`{ __typename }`)).status).toBe(200);
    const oddName = await h.call("POST", "/graphql", { body: { query: "query Fine { __typename }", operationName: "not a name!" } });
    expect(oddName.body.errors).toBeDefined();
    const after = await scrape(h);

    const delta = (operation: string, outcome: string) =>
      after.get("linkgate_graphql_operations_total", { operation, outcome }) - before.get("linkgate_graphql_operations_total", { operation, outcome });
    expect(delta(name, "ok")).toBe(2);
    expect(delta("MetricsBroken", "refused")).toBe(1);
    expect(delta("MetricsViewer", "refused")).toBe(1);
    expect(delta("anonymous", "ok")).toBe(1);
    expect(delta("other", "refused")).toBe(1);
    expect(after.labelValues("linkgate_graphql_operations_total", "operation").has("not a name!")).toBe(false);
  });

  it("counts one-time codes sent by channel, and refusals by the limit that refused", async () => {
    const before = await scrape(h);
    const email = `metrics-${unique()}@example.com`;
    // the default budget per identifier and client address is 5 sends; the 6th is refused
    for (let i = 0; i < 5; i++) expect((await h.call("POST", "/auth/otp/start", { body: { email } })).status).toBe(200);
    const refused = await h.call("POST", "/auth/otp/start", { body: { email } });
    expect(refused.status).toBe(429);
    const phone = "+12025550178";
    expect((await h.call("POST", "/auth/otp/start", { body: { phone } })).status).toBe(200);
    await h.mailbox.otp(phone); // the text really went out
    const after = await scrape(h);

    const delta = (name: string, labels: Record<string, string>) => after.get(name, labels) - before.get(name, labels);
    expect(delta("linkgate_otp_sends_total", { channel: "email" })).toBe(5);
    expect(delta("linkgate_otp_sends_total", { channel: "phone" })).toBe(1);
    expect(delta("linkgate_rate_limit_refusals_total", { limit: "sends_per_identifier_address" })).toBe(1);
    expect(delta("linkgate_rate_limit_refusals_total", { limit: "sends_per_address" })).toBe(0);
    expect(delta("linkgate_rate_limit_refusals_total", { limit: "emails_per_project" })).toBe(0);
    expect(delta("linkgate_otp_send_failures_total", { channel: "email", reason: "refused" })).toBe(0);
  });

  it("counts codes the transport did not take, by channel and reason", async () => {
    const before = await scrape(h);
    const gone = `metrics-gone-${unique()}@example.com`;
    h.mailbox.refuse(gone, 550, "5.1.1 no such user");
    expect((await h.call("POST", "/auth/otp/start", { body: { email: gone } })).status).toBe(400);
    const phone = "+12025550179";
    h.mailbox.refuse(phone, 503);
    expect((await h.call("POST", "/auth/otp/start", { body: { phone } })).status).toBe(503);
    const after = await scrape(h);
    const delta = (channel: string, reason: string) =>
      after.get("linkgate_otp_send_failures_total", { channel, reason }) - before.get("linkgate_otp_send_failures_total", { channel, reason });
    expect([delta("email", "refused"), delta("email", "unavailable"), delta("phone", "refused"), delta("phone", "unavailable")]).toEqual([1, 0, 0, 1]);
  });

  it("counts delivery attempts by outcome, and the commit → 2xx latency of the successful ones", async () => {
    const receiver = await TestReceiver.start();
    receiver.enqueue({ status: 500 }); // the first attempt fails, its retry succeeds
    const created = await h.op(CreateWebhookDocument, { input: { url: receiver.url, events: ["user.created"] } });
    if (created.createWebhook.__typename !== "CreateWebhookPayload") throw new Error(created.createWebhook.__typename);
    const before = await scrape(h);
    const worker = startWorker({ db: h.db, config: h.config, masterKey: h.app.deps.master, pollMs: 50 });
    try {
      await h.op(SendTestWebhookDocument, { webhookId: created.createWebhook.webhook.id, eventType: "user.created" });
      await receiver.waitFor(2, 15_000);
      const delta = (after: Scrape, name: string, labels: Record<string, string> = {}) => after.get(name, labels) - before.get(name, labels);
      // the worker records the result after the receiver has answered
      const after = await eventually(async () => {
        const s = await scrape(h);
        return delta(s, "linkgate_deliveries_total", { outcome: "succeeded" }) >= 1 && s;
      }, 15_000, "the success to be counted");
      expect(delta(after, "linkgate_deliveries_total", { outcome: "succeeded" })).toBe(1);
      expect(delta(after, "linkgate_deliveries_total", { outcome: "retried" })).toBe(1);
      expect(delta(after, "linkgate_deliveries_total", { outcome: "failed" })).toBe(0);
      expect(delta(after, "linkgate_delivery_latency_seconds_count")).toBe(1);
      expect(delta(after, "linkgate_delivery_latency_seconds_sum")).toBeGreaterThan(0);
    } finally {
      await worker.stop();
      await receiver.close();
    }
  });

  it("reports pending deliveries, the oldest due, leases held and disabled webhooks from the database", async () => {
    const before = await scrape(h);
    const created = await h.op(CreateWebhookDocument, { input: { url: "http://127.0.0.1:9/metrics-hook", events: ["user.created"] } });
    if (created.createWebhook.__typename !== "CreateWebhookPayload") throw new Error(created.createWebhook.__typename);
    const webhookId = created.createWebhook.webhook.id;
    // no worker runs in this test: the deliveries stay pending
    for (let i = 0; i < 3; i++) {
      const sent = await h.op(SendTestWebhookDocument, { webhookId, eventType: "user.created" });
      expect(sent.sendTestWebhook.__typename).toBe("SendTestWebhookPayload");
    }
    let s = await scrape(h);
    expect(s.get("linkgate_deliveries_pending") - before.get("linkgate_deliveries_pending")).toBe(3);
    expect(s.get("linkgate_deliveries_pending_estimated")).toBe(0);
    expect(s.get("linkgate_delivery_leases_held")).toBe(before.get("linkgate_delivery_leases_held"));

    // Two deliveries due for a while, the older one then claimed by a worker (the delivery
    // engine's own claim): the oldest due is the one still waiting, and the lease is counted.
    const ids = (await h.db.prisma.delivery.findMany({ where: { webhookId }, orderBy: { id: "asc" }, select: { id: true } })).map((d) => d.id);
    expect(ids).toHaveLength(3);
    await h.db.prisma.$executeRaw`UPDATE deliveries SET next_attempt_at = now() - interval '300 seconds' WHERE id = ${ids[0]}`;
    await h.db.prisma.$executeRaw`UPDATE deliveries SET next_attempt_at = now() - interval '120 seconds' WHERE id = ${ids[1]}`;
    const claimed = await claimDue(h.db, { workerId: "metrics-test", limit: 1, leaseMs: 600_000, perWebhookCap: 20 });
    expect(claimed.map((c) => c.deliveryId)).toEqual([ids[0]]);
    s = await scrape(h);
    expect(s.get("linkgate_deliveries_oldest_due_age_seconds")).toBeGreaterThanOrEqual(120);
    expect(s.get("linkgate_deliveries_oldest_due_age_seconds")).toBeLessThan(300);
    expect(s.get("linkgate_delivery_leases_held") - before.get("linkgate_delivery_leases_held")).toBe(1);
    expect(s.get("linkgate_deliveries_pending") - before.get("linkgate_deliveries_pending")).toBe(3);

    // A webhook the project turned off: its deliveries wait on purpose, so they are pending but
    // not "due" (they would otherwise look like a stuck worker).
    const disabled = await h.op(UpdateWebhookDocument, { id: webhookId, input: { enabled: false } });
    expect(disabled.updateWebhook.__typename).toBe("UpdateWebhookPayload");
    s = await scrape(h);
    expect(s.get("linkgate_webhooks_disabled", { reason: "project" }) - before.get("linkgate_webhooks_disabled", { reason: "project" })).toBe(1);
    expect(s.get("linkgate_webhooks_disabled", { reason: "failures" })).toBe(before.get("linkgate_webhooks_disabled", { reason: "failures" }));
    expect(s.get("linkgate_deliveries_oldest_due_age_seconds")).toBe(0);
    expect(s.get("linkgate_deliveries_pending") - before.get("linkgate_deliveries_pending")).toBe(3);

    const enabled = await h.op(UpdateWebhookDocument, { id: webhookId, input: { enabled: true } });
    expect(enabled.updateWebhook.__typename).toBe("UpdateWebhookPayload");
    s = await scrape(h);
    expect(s.get("linkgate_webhooks_disabled", { reason: "project" })).toBe(before.get("linkgate_webhooks_disabled", { reason: "project" }));
    expect(s.get("linkgate_deliveries_oldest_due_age_seconds")).toBeGreaterThanOrEqual(120);
  });
});

describe.each(backends)("metrics behind LINKGATE_METRICS_TOKEN on %s", (backend) => {
  let h: Harness;
  const token = randomBytes(24).toString("hex");
  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_METRICS_TOKEN: token } });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("refuses a scrape without the token or with a wrong one, from loopback too", async () => {
    const wrong: Record<string, string>[] = [
      {},
      { authorization: `Bearer ${token.slice(0, -1)}x` },
      { authorization: `Bearer ${token}x` },
      { authorization: "Bearer " },
      { authorization: `Basic ${Buffer.from(`metrics:${token}`).toString("base64")}` },
      { authorization: token },
    ];
    for (const headers of wrong) {
      for (const from of [undefined, "127.0.0.1", "203.0.113.5"]) {
        const res = await h.call("GET", "/metrics", { headers, from });
        expect(res.status, JSON.stringify({ headers, from })).toBe(401);
        expect(res.body.error).toBe("Unauthenticated");
        expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
      }
    }
  });

  it("serves the token's holder from any address", async () => {
    for (const from of ["203.0.113.5", "127.0.0.1", undefined]) {
      const s = await scrape(h, { from, headers: { authorization: `Bearer ${token}` } });
      expect(s.get("linkgate_metrics_database_up")).toBe(1);
    }
  });
});

// Once per process: the registry is process-wide, and these run after the suites above.
describe("metrics, once per process", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness("pglite");
  });
  afterAll(async () => {
    await h?.close();
  });

  it("every metric that docs/operations.md names, its alert rules included, is served", async () => {
    const doc = readFileSync(new URL("../docs/operations.md", import.meta.url), "utf8");
    const rules = /```yaml\n(groups:[\s\S]*?)```/.exec(doc)?.[1];
    expect(rules).toBeDefined();
    const { types } = (await scrape(h)).exposition;
    const named = new Set(doc.match(/\blinkgate_[a-z_]+/g));
    expect(named.size).toBeGreaterThan(10);
    for (const name of named) expect(familyOf(name, types), name).toBeDefined();
    for (const name of rules!.match(/\blinkgate_[a-z_]+/g)!) expect(familyOf(name, types), name).toBeDefined();
  });

  it(`gives at most ${MAX_OPERATION_NAMES} names their own series; more, and names that are too long, count as "other"`, async () => {
    const before = await scrape(h);
    const tooLong = `N${"x".repeat(64)}`;
    expect((await h.gql(`query ${tooLong} { __typename }`)).status).toBe(200);
    const extra = 20;
    for (let i = 0; i < MAX_OPERATION_NAMES + extra; i++) await h.gql(`query Cap_${i} { __typename }`);
    const after = await scrape(h);
    const names = after.labelValues("linkgate_graphql_operations_total", "operation");
    names.delete("anonymous");
    names.delete("other");
    expect(names.size).toBe(MAX_OPERATION_NAMES);
    expect(names.has(tooLong)).toBe(false);
    const others = after.get("linkgate_graphql_operations_total", { operation: "other", outcome: "ok" }) - before.get("linkgate_graphql_operations_total", { operation: "other", outcome: "ok" });
    expect(others).toBeGreaterThanOrEqual(extra + 1);
  });
});
