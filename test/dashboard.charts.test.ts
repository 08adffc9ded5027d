// Delivery charts through GraphQL, on PGlite and Postgres: attempts made by the real delivery
// worker against a real receiver are counted as succeeded, retried and failed per interval, per
// webhook and per project, with p50/p95 latency read from the histograms within a bucket of the
// exact values; rollup rows land in the right hour, are pruned after 8 days, survive concurrent
// writers, and go with their webhook. Secret key only.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fmtRate } from "../dashboard/src/rate.ts";
import { startWorker, type DeliveryWorker } from "../src/delivery/worker.ts";
import { newId } from "../src/ids.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";
import { eventually, TestReceiver } from "./support/receiver.ts";

const COUNTS = `succeeded retried failed p50Ms p95Ms`;
const CHART = `range stepSeconds from to points { start end ${COUNTS} } totals { ${COUNTS} }`;
const Q = {
  webhook: `query($id: ID!, $range: DeliveryChartRange!) { webhook(id: $id) { deliveryChart(range: $range) { ${CHART} } } }`,
  project: `query($range: DeliveryChartRange!) { deliveryChart(range: $range) { ${CHART} } }`,
  create: `mutation($input: WebhookInput!) { createWebhook(input: $input) { __typename ... on CreateWebhookPayload { webhook { id } } } }`,
  test: `mutation($id: ID!, $type: String!) { sendTestWebhook(webhookId: $id, eventType: $type) { __typename ... on SendTestWebhookPayload { eventId } } }`,
  remove: `mutation($id: ID!) { deleteWebhook(id: $id) { __typename } }`,
};

type Counts = { succeeded: number; retried: number; failed: number; p50Ms: number | null; p95Ms: number | null };
type Chart = { range: string; stepSeconds: number; from: string; to: string; points: (Counts & { start: string; end: string })[]; totals: Counts };

describe("the dashboard's success rate", () => {
  it("reads 100 % only when every finished delivery succeeded, and 0 % only when none did", () => {
    expect(fmtRate({ successRate: null })).toBe("—");
    expect(fmtRate({ successRate: 1 })).toBe("100 %");
    expect(fmtRate({ successRate: 0 })).toBe("0 %");
    expect(fmtRate({ successRate: 0.5 })).toBe("50 %");
    expect(fmtRate({ successRate: 2 / 3 })).toBe("66.7 %");
    // one failure in 3,000, one success in 3,000
    expect(fmtRate({ successRate: 2999 / 3000 })).toBe("99.9 %");
    expect(fmtRate({ successRate: 1 / 3000 })).toBe("0.1 %");
  });
});

describe.each(backends)("delivery charts on %s", (backend) => {
  let h: Harness;
  let worker: DeliveryWorker;
  let receiver: TestReceiver;
  let hookA = "";
  let hookB = "";

  beforeAll(async () => {
    // Three attempts a delivery: the first and two retries, 20 ms apart.
    h = await startHarness(backend, { env: { LINKGATE_WEBHOOK_RETRY_SCHEDULE_MS: "20,20" } });
    receiver = await TestReceiver.start();
    worker = startWorker({ db: h.db, config: h.config, masterKey: h.app.deps.master, pollMs: 20 });
    const create = async (tag: string) => {
      const r = await h.gql(Q.create, { input: { url: `${receiver.url}?${tag}`, events: ["user.created", "user.updated", "user.deleted", "user.merged"] } });
      return r.body.data.createWebhook.webhook.id as string;
    };
    hookA = await create("a");
    hookB = await create("b");
  });
  afterAll(async () => {
    await worker?.stop();
    await receiver?.close();
    await h?.close();
  });

  const gqlData = async (query: string, variables: Record<string, unknown>, headers?: Record<string, string>) => {
    const r = await h.gql(query, variables, headers);
    expect(r.body.errors, JSON.stringify(r.body.errors)).toBeUndefined();
    return r.body.data;
  };
  const webhookChart = async (id: string, range = "day"): Promise<Chart> => (await gqlData(Q.webhook, { id, range })).webhook.deliveryChart;
  const projectChart = async (range = "day"): Promise<Chart> => (await gqlData(Q.project, { range })).deliveryChart;

  const sum = (c: Chart, k: "succeeded" | "retried" | "failed") => c.points.reduce((n, p) => n + p[k], 0);
  const totalsOf = (c: Chart) => ({ succeeded: c.totals.succeeded, retried: c.totals.retried, failed: c.totals.failed });

  /** Sends a test event to one webhook and waits until its delivery is finished. */
  async function deliver(webhookId: string, type: string) {
    const sent = await gqlData(Q.test, { id: webhookId, type });
    const eventId = sent.sendTestWebhook.eventId as string;
    await eventually(
      async () => (await h.db.prisma.delivery.findFirst({ where: { eventId, webhookId, status: { not: "pending" } } })) !== null,
      10_000,
      `the delivery of ${eventId}`,
    );
  }

  /** The exact percentile (nearest rank) of the webhook's successful attempt durations. */
  async function exactPercentile(webhookId: string, q: number): Promise<number> {
    const rows = await h.db.prisma.$queryRaw<{ ms: number }[]>`
      SELECT percentile_disc(${q}::float8) WITHIN GROUP (ORDER BY a.duration_ms) AS ms
      FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
      WHERE d.webhook_id = ${webhookId} AND a.status_code IN (200, 201, 202)`;
    return Number(rows[0].ms);
  }
  /** Within one histogram bucket (9 %) of the exact value, or 1 ms for the smallest. */
  const near = (got: number | null, exact: number) => {
    expect(got).not.toBeNull();
    expect(Math.abs(got! - exact), `${got} ms against ${exact} ms`).toBeLessThanOrEqual(Math.max(1, exact * 0.1));
  };

  it("counts the worker's attempts per webhook and across the project, with p50 and p95 of the successful ones", async () => {
    // The receiver answers by webhook (?a, ?b) and event type; slow answers spread the latencies.
    const seen = new Map<string, number>();
    receiver.respond((r) => {
      const key = `${r.path}|${r.headers["x-service-event-type"]}`;
      const n = (seen.get(key) ?? 0) + 1;
      seen.set(key, n);
      if (r.path.endsWith("?a")) {
        if (r.headers["x-service-event-type"] === "user.created") return { status: 200, delayMs: 40 * n };
        if (r.headers["x-service-event-type"] === "user.updated") return { status: 500 };
        if (r.headers["x-service-event-type"] === "user.deleted") return { status: 410 };
      }
      if (r.headers["x-service-event-type"] === "user.merged") return { status: n === 1 ? 503 : 200 };
      return { status: 200 };
    });
    for (let i = 0; i < 3; i++) await deliver(hookA, "user.created"); // 40, 80, 120 ms
    await deliver(hookA, "user.updated"); // 500 ×3: retried, retried, failed
    await deliver(hookA, "user.deleted"); // 410: failed at once
    await deliver(hookB, "user.merged"); // 503 then 200: retried, succeeded

    const a = await webhookChart(hookA);
    expect(a.range).toBe("day");
    expect(a.stepSeconds).toBe(3600);
    expect(a.points).toHaveLength(24);
    expect(totalsOf(a)).toEqual({ succeeded: 3, retried: 2, failed: 2 });
    expect({ succeeded: sum(a, "succeeded"), retried: sum(a, "retried"), failed: sum(a, "failed") }).toEqual(totalsOf(a));
    near(a.totals.p50Ms, await exactPercentile(hookA, 0.5));
    near(a.totals.p95Ms, await exactPercentile(hookA, 0.95));
    expect(a.totals.p50Ms!).toBeGreaterThanOrEqual(60); // the 80 ms answer, not the failures
    // Consecutive intervals from `from` to `to`, an hour each, the last holding now.
    expect(Date.parse(a.points[0].start)).toBe(Date.parse(a.from));
    expect(Date.parse(a.points[23].end)).toBe(Date.parse(a.to));
    a.points.forEach((p, i) => expect(Date.parse(p.end) - Date.parse(p.start), `point ${i}`).toBe(3600_000));
    expect(Date.parse(a.to)).toBeGreaterThan(Date.now() - 60_000);

    expect(totalsOf(await webhookChart(hookB))).toEqual({ succeeded: 1, retried: 1, failed: 0 });
    const project = await projectChart();
    expect(totalsOf(project)).toEqual({ succeeded: 4, retried: 3, failed: 2 });

    const week = await projectChart("week");
    expect(week.points).toHaveLength(28);
    expect(week.stepSeconds).toBe(6 * 3600);
    expect(totalsOf(week)).toEqual(totalsOf(project));
    expect(Date.parse(week.points[27].end) - Date.parse(week.points[0].start)).toBe(7 * 24 * 3600_000);
    // Intervals start on UTC multiples of six hours.
    expect(new Date(week.points[0].start).getUTCHours() % 6).toBe(0);
  });

  it("counts a redelivery's attempts as they come, keeping the earlier failure", async () => {
    const before = totalsOf(await webhookChart(hookA));
    const failed = await h.db.prisma.delivery.findFirstOrThrow({ where: { webhookId: hookA, eventType: "user.updated" } });
    receiver.respond(() => ({ status: 200 }));
    const r = await h.gql(`mutation($id: ID!) { redeliverWebhookDelivery(deliveryId: $id) { __typename } }`, { id: failed.id });
    expect(r.body.data.redeliverWebhookDelivery.__typename).toBe("Delivery");
    await eventually(async () => (await h.db.prisma.delivery.findUnique({ where: { id: failed.id } }))?.status === "succeeded", 10_000, "the redelivery");
    expect(totalsOf(await webhookChart(hookA))).toEqual({ ...before, succeeded: before.succeeded + 1 });
  });

  describe("the hourly rows", () => {
    let hookC = "";
    const deliveryIds: string[] = [];

    beforeAll(async () => {
      const r = await h.gql(Q.create, { input: { url: `${receiver.url}?c`, events: ["user.created"] } });
      hookC = r.body.data.createWebhook.webhook.id;
    });

    /** A delivery of hook C (its event and all), for attempts written straight into the log. */
    async function delivery(status: "pending" | "succeeded" | "failed", attempts: number): Promise<string> {
      const eventId = newId("evt");
      const id = newId("dlv");
      await h.db.prisma.outboxEvent.create({ data: { id: eventId, projectId: h.projectId, eventType: "user.created", body: "{}" } });
      await h.db.prisma.delivery.create({ data: { id, eventId, webhookId: hookC, projectId: h.projectId, eventType: "user.created", status, attempts } });
      deliveryIds.push(id);
      return id;
    }
    const attempt = (deliveryId: string, n: number, ago: string, code: number, ms: number) =>
      h.db.prisma.$executeRawUnsafe(
        `INSERT INTO delivery_attempts (id, delivery_id, attempt, started_at, duration_ms, status_code, request_headers)
         VALUES ($1, $2, $3, now() - $4::interval, $5, $6, '{}')`,
        newId("att"),
        deliveryId,
        n,
        ago,
        ms,
        code,
      );
    const rows = () =>
      h.db.prisma.$queryRaw<{ hour: Date; succeeded: number; retried: number; failed: number }[]>`
        SELECT hour, succeeded, retried, failed FROM dashboard.webhook_hours WHERE webhook_id = ${hookC} ORDER BY hour`;

    it("puts each attempt in its hour: the day chart shows the last 24 hours, the week chart 7 days, and rows past 8 days are dropped", async () => {
      const old = await delivery("succeeded", 1);
      await attempt(old, 1, "9 days", 200, 10);
      expect(await rows()).toHaveLength(1);

      const recent = await delivery("failed", 3);
      await attempt(recent, 1, "3 hours", 500, 5); // retried
      await attempt(recent, 2, "30 hours", 500, 5); // retried, a day and more ago
      await attempt(recent, 3, "3 hours", 500, 5); // the last of the schedule: failed
      // A new hour's row drops the webhook's rows older than 8 days.
      const hours = await rows();
      expect(hours.every((r) => r.hour.getTime() > Date.now() - 8 * 86_400_000)).toBe(true);
      expect(hours.map((r) => ({ retried: r.retried, failed: r.failed }))).toEqual([
        { retried: 1, failed: 0 },
        { retried: 1, failed: 1 },
      ]);

      const day = await webhookChart(hookC);
      expect(totalsOf(day)).toEqual({ succeeded: 0, retried: 1, failed: 1 });
      const threeHoursAgo = Date.now() - 3 * 3600_000;
      const point = day.points.find((p) => Date.parse(p.start) <= threeHoursAgo && threeHoursAgo < Date.parse(p.end))!;
      expect({ retried: point.retried, failed: point.failed }).toEqual({ retried: 1, failed: 1 });
      expect(point.p50Ms).toBeNull();
      expect(totalsOf(await webhookChart(hookC, "week"))).toEqual({ succeeded: 0, retried: 2, failed: 1 });
    });

    it("adds up attempts logged by concurrent statements into one row, without losing any", async () => {
      const id = await delivery("succeeded", 1);
      const before = totalsOf(await webhookChart(hookC));
      await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          h.db.prisma.$executeRawUnsafe(
            `INSERT INTO delivery_attempts (id, delivery_id, attempt, started_at, duration_ms, status_code, request_headers)
             SELECT 'att_c${i}_' || n, $1, 1, now(), 7 + n, 200, '{}' FROM generate_series(1, 10) AS n`,
            id,
          ),
        ),
      );
      const after = await webhookChart(hookC);
      expect(totalsOf(after)).toEqual({ ...before, succeeded: before.succeeded + 120 });
      near(after.totals.p50Ms, 12); // 8 … 17 ms, twelve times each
    });

    it("drops a deleted webhook's rows; the project's chart keeps counting what happened", async () => {
      const project = totalsOf(await projectChart("week"));
      expect((await rows()).length).toBeGreaterThan(0);
      const r = await h.gql(Q.remove, { id: hookC });
      expect(r.body.data.deleteWebhook.__typename).toBe("DeleteWebhookPayload");
      expect(await rows()).toEqual([]);
      expect(totalsOf(await projectChart("week"))).toEqual(project);
    });
  });

  it("needs the secret key, and shows another project nothing of this one", async () => {
    for (const query of [Q.project, `query($id: ID!, $range: DeliveryChartRange!) { webhook(id: $id) { id } deliveryChart(range: $range) { range } }`]) {
      const r = await h.gql(query, { id: hookA, range: "day" }, { "x-api-key": h.publishableKey });
      expect(r.body.errors?.[0]?.extensions).toMatchObject({ code: "FORBIDDEN", error: "SecretKeyRequired" });
      expect(r.body.data?.deliveryChart ?? null).toBeNull();
    }
    const other = await h.gql(`mutation { createProject(name: "other") { ... on CreateProjectPayload { secretKey } } }`, {}, { "x-admin-token": h.adminToken });
    const key = { "x-api-key": other.body.data.createProject.secretKey as string };
    const theirs = await gqlData(Q.project, { range: "week" }, key);
    expect(totalsOf(theirs.deliveryChart)).toEqual({ succeeded: 0, retried: 0, failed: 0 });
    expect(theirs.deliveryChart.totals.p50Ms).toBeNull();
    expect((await gqlData(Q.webhook, { id: hookA, range: "day" }, key)).webhook).toBeNull();
    const bad = await h.gql(Q.project, { range: "month" });
    expect(bad.body.errors?.[0]?.message).toMatch(/month/);
  });
});
