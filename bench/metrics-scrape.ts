// How long GET /metrics takes with a large delivery backlog on Postgres.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx bench/metrics-scrape.ts
//   (BENCH_PENDING=1000000 pending deliveries over BENCH_HOOKS=10 webhooks by default)
//
// Seeds one throw-away database (dropped at the end) with BENCH_PENDING events and their
// pending deliveries in one INSERT … SELECT, due 1 ms apart (as if enqueued one by one; the
// oldest about BENCH_PENDING ms ago), then times (and, after the VACUUM,
// leases LEASED of them with the delivery engine's claim):
// * the whole scrape: GET /metrics through app.fetch (auth, the process's counters, the
//   backlog statement, rendering), RUNS times, right after the seed (no VACUUM: no statistics,
//   no visibility map, the worst moment) and after VACUUM ANALYZE (as autovacuum leaves it);
// * the backlog statement alone (readBacklog);
// * for comparison, the exact count it avoids: count(*) of all pending rows.
// Prints the median, p90 and max of each, and the gauges the scrape reported (BENCH_EXPLAIN=1:
// and the statement's plan with its actual row counts and buffers).
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { buildApp } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { createLogger } from "../src/log.ts";
import { claimDue } from "../src/delivery/sql.ts";
import { backlogStatement, readBacklog, withIndexPlans } from "../src/delivery/pending.ts";
import { createWebhook } from "../src/webhooks/service.ts";
import { authenticateProject } from "../src/auth/authenticate.ts";
import { createApiKey } from "../src/auth/projects.ts";

process.env.TEST_DATABASE_URL ||= process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
const { openTestDatabase } = await import("../test/support/db.ts");

const PENDING = Number(process.env.BENCH_PENDING ?? 1_000_000);
const HOOKS = Number(process.env.BENCH_HOOKS ?? 10);
const RUNS = Number(process.env.BENCH_RUNS ?? 30);
const LEASED = 50;

const n = (x: number) => x.toLocaleString("en-US");

async function timed(runs: number, fn: () => Promise<unknown>): Promise<{ p50: number; p90: number; max: number }> {
  await fn(); // the first run pays for connection setup and planning caches; not counted
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await fn();
    ms.push(performance.now() - t);
  }
  ms.sort((a, b) => a - b);
  const at = (q: number) => Number(ms[Math.min(ms.length - 1, Math.floor(q * ms.length))]!.toFixed(1));
  return { p50: at(0.5), p90: at(0.9), max: at(1) };
}

async function main() {
  console.log(
    `machine: ${os.cpus().length} × ${os.cpus()[0]?.model}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, load ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}, ${new Date().toISOString()}`,
  );
  const db = await openTestDatabase("postgres");
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "linkgate-bench-"));
  const config = loadConfig({
    LINKGATE_DATA_DIR: dataDir,
    LINKGATE_SECRET_KEY: randomBytes(32).toString("base64"),
    LINKGATE_WEBHOOK_ALLOW_PRIVATE: "1",
  });
  const app = await buildApp(config, { db, logger: createLogger("silent") });
  try {
    const server = (await db.prisma.$queryRawUnsafe<{ v: string }[]>("SELECT version() AS v"))[0]!.v.split(" on ")[0];
    const project = await db.prisma.project.findFirstOrThrow({ where: { name: "default" } });
    const { apiKey } = await createApiKey(db.prisma, project.id, "secret");
    const owner = await authenticateProject(app.deps, { apiKey, clientAddress: "127.0.0.1" });
    const hookIds: string[] = [];
    for (let i = 0; i < HOOKS; i++) {
      hookIds.push((await createWebhook(app.deps, owner, { url: `http://127.0.0.1:9/hook-${i}`, events: ["user.created"] })).webhook.id);
    }
    const seedStart = performance.now();
    await db.prisma.$executeRaw`
      WITH ev AS (
        INSERT INTO outbox_events (id, project_id, event_type, body)
        SELECT 'evt_m_' || i, ${project.id}, 'user.created', '{}'
        FROM generate_series(1, ${PENDING}::int) i
        RETURNING id, seq
      )
      INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type, next_attempt_at)
      SELECT 'dlv_m_' || substr(ev.id, 7), ev.id, (${hookIds}::text[])[(1 + ev.seq % ${HOOKS}::int)::int], ${project.id}, 'user.created',
             now() - (${PENDING}::int - ev.seq) * interval '1 millisecond'
      FROM ev`;
    console.log(`${server}; seeded ${n(PENDING)} pending deliveries over ${HOOKS} webhooks in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`);

    const scrape = async () => {
      const res = await app.fetch(new Request("http://linkgate.local/metrics"));
      if (res.status !== 200) throw new Error(`GET /metrics: ${res.status}`);
      return res.text();
    };
    const gauges = (text: string) =>
      text
        .split("\n")
        .filter((l) => /^linkgate_(deliveries_pending|deliveries_oldest|delivery_leases|webhooks_disabled|metrics_database)/.test(l))
        .join("; ");
    const exactCount = () => db.prisma.$queryRawUnsafe(`SELECT count(*) FROM deliveries WHERE status = 'pending'`);

    const rows: Record<string, unknown>[] = [];
    const measure = async (state: string) => {
      rows.push({ state, what: "GET /metrics (whole scrape)", ...(await timed(RUNS, scrape)) });
      rows.push({ state, what: "backlog statement alone", ...(await timed(RUNS, () => readBacklog(db.prisma))) });
      rows.push({ state, what: "exact count(*) of pending (not used)", ...(await timed(Math.min(RUNS, 10), exactCount)) });
      console.log(`${state}: ${gauges(await scrape())}`);
      if (process.env.BENCH_EXPLAIN) {
        const q = backlogStatement();
        const plan = await withIndexPlans(db.prisma, db.prisma.$queryRawUnsafe<{ "QUERY PLAN": string }[]>(`EXPLAIN (ANALYZE, BUFFERS) ${q.text}`, ...q.values));
        console.log(plan.map((r) => r["QUERY PLAN"]).join("\n"));
      }
    };
    await measure("fresh seed, no VACUUM");
    const vacuumStart = performance.now();
    await db.prisma.$executeRawUnsafe("VACUUM ANALYZE outbox_events");
    await db.prisma.$executeRawUnsafe("VACUUM ANALYZE deliveries");
    // some in flight, leased by the delivery engine's own claim (with statistics, as it runs in steady state)
    const leased = await claimDue(db, { workerId: "bench", limit: LEASED, leaseMs: 3_600_000, perWebhookCap: 20 });
    console.log(`VACUUM ANALYZE in ${((performance.now() - vacuumStart) / 1000).toFixed(1)} s; then ${leased.length} deliveries leased by claimDue`);
    await measure(`after VACUUM ANALYZE, ${leased.length} leased`);
    console.log(`\nms over ${RUNS} runs (exact count: ${Math.min(RUNS, 10)}), after one unmeasured run each`);
    console.table(rows);
  } finally {
    await app.close();
    await db.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
