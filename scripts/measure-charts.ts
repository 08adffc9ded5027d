// `npx tsx scripts/measure-charts.ts [--keep]`: what the delivery charts cost with 1,000,000
// deliveries on Postgres (the data set of scripts/measure-seed.ts):
//   1. reading a chart from the hourly rollups (src/delivery/charts.ts), per webhook and per project;
//   2. the same series aggregated from the delivery log itself, with the log's own indexes — what
//      a chart would cost without the rollups — and whether both agree;
//   3. what keeping the rollups costs the delivery worker: the rollup trigger's share of logging a
//      batch of 50 attempts, and what the two event indexes of the users view cost an enqueue.
// A measurement, not a test: it prints tables. Part 3 leaves the data set as it found it.
import os from "node:os";
import pg from "pg";
import { authenticateProject } from "../src/auth/authenticate.ts";
import { CHART_RANGES, deliveryChart, type ChartRange } from "../src/delivery/charts.ts";
import { BUSY_WEBHOOK, openMeasured, summary } from "./measure-seed.ts";

const RUNS = Number(process.env.RUNS ?? 20);
const m = await openMeasured({ keep: process.argv.includes("--keep") });
const owner = await authenticateProject(m.app.deps, { apiKey: m.apiKey, clientAddress: "127.0.0.1" });

async function timed<T>(runs: number, fn: () => Promise<T>): Promise<{ ms: ReturnType<typeof summary>; last: T }> {
  let last!: T;
  for (let i = 0; i < 2; i++) last = await fn(); // warm-up
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    last = await fn();
    times.push(performance.now() - t0);
  }
  return { ms: summary(times), last };
}

/** The series straight from the log: attempts joined to their deliveries, by interval. */
async function fromLog(client: pg.Client, webhookId: string | null, range: ChartRange) {
  const { points, stepHours } = CHART_RANGES[range];
  const res = await client.query(
    `WITH bounds AS (SELECT date_bin($2::interval, now(), timestamptz '2000-01-01') - ($3::int - 1) * $2::interval AS first)
     SELECT count(*) FILTER (WHERE a.status_code IN (200, 201, 202))::int AS succeeded,
            count(*) FILTER (WHERE a.status_code NOT IN (200, 201, 202) AND NOT (d.attempts = a.attempt AND d.status IN ('failed', 'gone')))::int AS retried,
            count(*) FILTER (WHERE a.status_code NOT IN (200, 201, 202) AND d.attempts = a.attempt AND d.status IN ('failed', 'gone'))::int AS failed,
            percentile_disc(0.5) WITHIN GROUP (ORDER BY a.duration_ms) FILTER (WHERE a.status_code IN (200, 201, 202)) AS p50,
            percentile_disc(0.95) WITHIN GROUP (ORDER BY a.duration_ms) FILTER (WHERE a.status_code IN (200, 201, 202)) AS p95,
            count(DISTINCT date_bin($2::interval, a.started_at, b.first))::int AS intervals
     FROM bounds b
     JOIN deliveries d ON d.project_id = $4 AND ($1::text IS NULL OR d.webhook_id = $1) AND d.created_at >= b.first - interval '1 day'
     JOIN delivery_attempts a ON a.delivery_id = d.id AND a.started_at >= b.first`,
    [webhookId, `${stepHours} hours`, points, m.projectId],
  );
  return res.rows[0] as { succeeded: number; retried: number; failed: number; p50: number; p95: number };
}

const client = new pg.Client({ connectionString: m.url });
await client.connect();

// ---- 1 and 2: reads --------------------------------------------------------------------------------

const scopes: [string, string | null][] = [
  ["busiest webhook (500,000 deliveries)", BUSY_WEBHOOK],
  ["a webhook with 55,000 deliveries", "wh_measure_1"],
  ["the project (all webhooks)", null],
];
const reads: Record<string, unknown>[] = [];
const agreement: string[] = [];
for (const [scope, webhookId] of scopes) {
  for (const range of ["day", "week"] as const) {
    const rolled = await timed(RUNS, () => deliveryChart(m.db, owner, range, webhookId));
    const raw = await timed(Math.max(3, Math.floor(RUNS / 5)), () => fromLog(client, webhookId, range));
    reads.push({
      chart: `${scope}, ${range === "day" ? "24 hours" : "7 days"}`,
      "rollup median ms": rolled.ms.median,
      "rollup p95 ms": rolled.ms.p95,
      "from the log median ms": raw.ms.median,
      "from the log max ms": raw.ms.max,
    });
    const t = rolled.last.totals;
    const same = t.succeeded === raw.last.succeeded && t.retried === raw.last.retried && t.failed === raw.last.failed;
    const near = (a: number | null, b: number) => a !== null && Math.abs(a - b) <= Math.max(1, b * 0.1);
    agreement.push(
      `${scope}, ${range}: rollup ${t.succeeded}/${t.retried}/${t.failed} p50 ${t.p50Ms} p95 ${t.p95Ms}; log ${raw.last.succeeded}/${raw.last.retried}/${raw.last.failed} p50 ${raw.last.p50} p95 ${raw.last.p95} — ${same && near(t.p50Ms, raw.last.p50) && near(t.p95Ms, raw.last.p95) ? "agree" : "DIFFER"}`,
    );
  }
}

// ---- 3: writes -------------------------------------------------------------------------------------

/** Times `statement` `n` times inside a transaction that is rolled back; `setup` runs first in it. */
async function inRolledBack(setup: string | null, n: number, statement: (i: number) => [string, unknown[]]) {
  await client.query("BEGIN");
  try {
    if (setup) await client.query(setup);
    const times: number[] = [];
    for (let i = 0; i < n; i++) {
      const [text, values] = statement(i);
      const t0 = performance.now();
      await client.query(text, values);
      times.push(performance.now() - t0);
    }
    return summary(times);
  } finally {
    await client.query("ROLLBACK");
  }
}

const BATCH = 50;
const batches = 200;
const deliveryIds = (await client.query(`SELECT id FROM deliveries WHERE status = 'succeeded' ORDER BY id LIMIT ${BATCH * batches}`)).rows.map(
  (r: { id: string }) => r.id,
);
// The attempt-log part of the worker's record statement (src/delivery/sql.ts): one INSERT … SELECT
// FROM unnest per batch.
const logBatch = (tag: string) => (i: number): [string, unknown[]] => {
  const ids = deliveryIds.slice(i * BATCH, (i + 1) * BATCH);
  return [
    `INSERT INTO delivery_attempts (id, delivery_id, attempt, started_at, duration_ms, status_code, request_headers)
     SELECT 'att_bench_' || $2::text || '_' || n, d, 2, now(), 40 + n, CASE WHEN n % 10 = 0 THEN 500 ELSE 200 END, '{}'
     FROM unnest($1::text[]) WITH ORDINALITY AS u(d, n)`,
    [ids, `${tag}${i}`],
  ];
};
/**
 * Logs the batches one statement at a time, each its own transaction as the worker's are (in one
 * long transaction every upsert of an hour's row would walk the versions the earlier ones left),
 * under EXPLAIN ANALYZE, which times the statement and, apart, the trigger's share of it. Then
 * removes the attempts and rebuilds the hours they touched from the log: the rollups are derived.
 */
async function logBatches() {
  const since = (await client.query("SELECT date_trunc('hour', now()) AS h")).rows[0].h as Date;
  const statement: number[] = [];
  const trigger: number[] = [];
  try {
    for (let i = 0; i < batches; i++) {
      const [text, values] = logBatch("t")(i);
      const plan = (await client.query(`EXPLAIN (ANALYZE) ${text}`, values)).rows.map((r: Record<string, string>) => r["QUERY PLAN"]);
      const ms = (re: RegExp) => Number(re.exec(plan.find((l: string) => re.test(l)) ?? "")?.[1] ?? NaN);
      statement.push(ms(/^Execution Time: ([\d.]+) ms/));
      trigger.push(ms(/^Trigger delivery_attempts_dashboard_hours: time=([\d.]+)/));
    }
  } finally {
    await client.query("BEGIN");
    await client.query("DELETE FROM delivery_attempts WHERE id LIKE 'att_bench_%'");
    await client.query("DELETE FROM dashboard.webhook_hours WHERE hour >= $1", [since]);
    await client.query("DELETE FROM dashboard.project_hours WHERE hour >= $1", [since]);
    await client.query(
      `SELECT dashboard.add_outcomes(array_agg(dashboard.outcome(d.project_id, d.webhook_id, d.status, d.attempts, a.attempt, a.started_at, a.status_code, a.duration_ms)))
       FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE a.started_at >= $1 HAVING count(*) > 0`,
      [since],
    );
    await client.query("COMMIT");
  }
  return { statement: summary(statement), trigger: summary(trigger) };
}
const logged = await logBatches();

const enqueueBatch = (tag: string) => (i: number): [string, unknown[]] => [
  `INSERT INTO outbox_events (id, project_id, event_type, body)
   SELECT 'evt_bench_' || $2::text || '_' || n, $1, 'user.updated',
          json_build_object('id', 'evt_bench_' || n, 'event_type', 'user.updated', 'project_id', $1::text,
                            'data', json_build_object('user', json_build_object('user_id', 'acc_m' || n, 'email', 'user' || n || '@example.com')))::text
   FROM generate_series(1, 2) n`,
  [m.projectId, `${tag}${i}`],
];
const withIndexes = await inRolledBack(null, batches, enqueueBatch("i"));
const withoutIndexes = await inRolledBack("DROP INDEX outbox_events_account_idx; DROP INDEX outbox_events_secondary_account_idx", batches, enqueueBatch("x"));

const rollupRows = (await client.query(`SELECT (SELECT count(*) FROM dashboard.webhook_hours)::int AS hooks, (SELECT count(*) FROM dashboard.project_hours)::int AS projects`)).rows[0];
const size = (await client.query(`SELECT pg_size_pretty(pg_total_relation_size('dashboard.webhook_hours') + pg_total_relation_size('dashboard.project_hours')) AS size`)).rows[0].size;

console.log(`machine: ${os.cpus().length} cores, load average ${os.loadavg().map((l) => l.toFixed(1)).join(" ")} (other processes share it)`);
console.log(`\n## chart reads (${RUNS} runs each; "from the log" is the same series aggregated from deliveries and attempts)\n`);
console.table(reads);
console.log("\nthe rollup and the log agree (succeeded/retried/failed, p50 and p95 within 9 %):\n  " + agreement.join("\n  "));
console.log(`\nrollups: ${rollupRows.hooks} webhook-hour rows, ${rollupRows.projects} project-hour rows, ${size} in all`);
console.log(`\n## what the rollups and indexes cost writers (${batches} statements each)\n`);
console.table([
  {
    statement: `log ${BATCH} attempts (a worker batch)`,
    "statement ms (median)": logged.statement.median,
    "statement p95": logged.statement.p95,
    "of which the rollup trigger (median)": logged.trigger.median,
    "trigger p95": logged.trigger.p95,
  },
]);
console.table([
  {
    statement: "enqueue 2 events (a link's user.merged + user.updated)",
    "with the event indexes ms (median)": withIndexes.median,
    "with p95": withIndexes.p95,
    "without ms (median)": withoutIndexes.median,
    "without p95": withoutIndexes.p95,
  },
]);

await client.end();
await m.close();
process.exit(0);
