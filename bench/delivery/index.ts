// Delivery engine benchmark: `npm run bench -- delivery`, or
// `npx tsx bench/delivery/index.ts [--only=ceiling,small,big,open,gw,pglite,statements]`.
// Needs a Postgres server (TEST_DATABASE_URL, DATABASE_URL, or postgres://postgres@127.0.0.1:5432/test);
// it creates its own databases there and drops them at the end, whatever happens. ~6-8 minutes.
//
// Every system does the same work per event: sign the exact stored body with the webhook's secret
// (unsealed once per webhook) through src/delivery/sender.ts (target check, the signature headers
// of src/webhooks/signing.ts, a keep-alive undici pool) and POST it to one node:http receiver on
// loopback, in this process, that answers 200. Senders run in child processes, as deployed:
// `workers` is the number of processes, each with at most CONCURRENCY sends in flight. Every
// child first sends WARMUP requests (JIT, connections) before it counts as started. Throughput
// rows are REPEAT timed runs with the same processes; the table shows the median run and lists
// all of them (the machine may be shared).
//
// * ours, drain: HOOKS webhooks hold N pending deliveries, written with one INSERT … SELECT
//   generate_series while the webhooks are disabled, then VACUUM ANALYZE (as autovacuum would)
//   and CHECKPOINT (as time would). The worker processes are started and idle; at t0 one
//   statement enables the webhooks (and NOTIFYs), which makes the whole backlog due at once.
//   events/s = the first DRAIN deliveries to reach the receiver / time since t0; p50/p99 =
//   t0 → receipt over those DRAIN (queueing behind the backlog: about half and all of the drain
//   time). N = 10,000: a new backlog for every run, all drained. N = 1,000,000: seeded once;
//   every run (1 worker, then 4) times the oldest DRAIN still pending, so it stays above 950,000.
// * graphile-worker, drain: the same DRAIN events enqueued as jobs by one addJobs() call (one
//   add_jobs statement: one commit at t0) while its worker processes run idle. Its own fresh
//   database on the same server, tuned as its performance docs advise (GW_TUNING). When both
//   run (the default, or --only=small,gw), the two systems' small drains alternate run by run
//   (measure.ts alternating: ours, graphile-worker, ours, …, both systems' processes started),
//   and the goal's ratio is the median of the REPEAT pairs' ratios: the machine's speed drifts
//   within minutes, and a pair run back to back shares it.
// * ceiling: a bare loop with no database: DRAIN POSTs, CONCURRENCY in flight per process.
//   p50/p99 are single request times (there is no queue).
// * open loop: each rate of OPEN_RATES (500 and 2,000 events a second) for OPEN_SECONDS (after
//   OPEN_WARMUP_SECONDS not counted), each event committed on its own (ours: the statement
//   enqueue() sends, fanned out to one webhook; graphile-worker: addJob()), both as prepared
//   statements on the pg driver, 1 worker process: p50/p99 of commit → receipt. The sender CPU
//   of the open-loop rows is the worker's over both rates.
// * PGlite: the same drains (1 worker: PGlite is one process's database, so the worker, its
//   database and the seeding all live in one child) and the open loop at OPEN_RATE (500/s),
//   whose events are committed in that child too, through enqueue().
// * CPU columns, per delivered event: the sending processes' CPU (process.cpuUsage, from start
//   to stop, all runs; for PGlite that includes the database), that of the database's backends
//   (from /proc, Linux only; timed part of the runs only) and the receiver's (this process,
//   from t0 to the last counted receipt; drains only).
// * statements: CPU per delivery of the claim and of the recording of results on their own
//   (bench/delivery-statements.ts), and the share of HOT updates of `deliveries` over them;
//   then the same two in the leanest delivery data model (bench/delivery-lower-bound.ts: a queue
//   that rows leave by DELETE and an append-only attempt log, no status kept), a lower bound on
//   what any redesign of the delivery tables can save.
//
// For trying changes: --only=…; BENCH_DELIVERY_BIG (the big backlog), BENCH_DELIVERY_BATCH,
// BENCH_DELIVERY_POOL and BENCH_DELIVERY_CAP (our worker's claim size, connections and
// per-webhook cap); BENCH_CHILD_NODE_ARGS (node flags for the children, e.g. "--cpu-prof
// --cpu-prof-dir=tmp/prof"); BENCH_DELIVERY_COMMITS=1 (print the transactions each timed run
// committed).
//
// This file runs the parts in order and prints the report; the other files of bench/delivery/
// are the child program (child.ts) and starting it (processes.ts), the measurements
// (measure.ts), our rows (ours.ts), graphile-worker's (graphile.ts), the databases
// (database.ts) and the tables (report.ts).
import { loadavg } from "node:os";
import { pathToFileURL } from "node:url";
import { openDatabase } from "../../src/db/client.ts";
import { applyMigrations } from "../../src/db/migrations.ts";
import { newMasterKey, TestReceiver } from "../../test/support/receiver.ts";
import type { StatementCost } from "../delivery-statements.ts";
import { admin, created, createDatabase, oursDatabase, seedBacklog, withDatabase } from "./database.ts";
import { gwDrainSide, gwOpenLoops, openGraphile, type Graphile } from "./graphile.ts";
import { alternating } from "./measure.ts";
import { ceiling, oursDrain, oursDrainSide, oursOpenLoops, pgliteRows, statements } from "./ours.ts";
import { printReport } from "./report.ts";
import { BIG, DRAIN, n, REPEAT, type Ctx, type Row } from "./shared.ts";

/** `--only=ceiling,small,big,open,gw,pglite,statements` runs a subset (for trying a change); the default is all. */
export async function main(argv: string[] = []): Promise<void> {
  const only = argv.find((a) => a.startsWith("--only="))?.slice("--only=".length).split(",");
  const want = (part: string) => !only || only.includes(part);
  const log = (msg: string) => console.error(`[bench delivery] ${msg}`);
  const started = performance.now();
  const masterKey = newMasterKey();
  const receiver = await TestReceiver.start({ status: 200 });
  const rows: Row[] = [];
  let costs: StatementCost[] = [];
  const failed: string[] = [];
  const load = () => loadavg().map((l) => l.toFixed(1)).join(" ");
  const loadAtStart = load();
  /** Runs one part; a failure is reported and the other parts still run. */
  const part = async (name: string, fn: () => Promise<void>) => {
    if (!want(name)) return;
    try {
      await fn();
    } catch (err) {
      failed.push(name);
      log(`${name} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    }
  };
  try {
    // One migrated template; every database of ours is a copy of it (CREATE DATABASE … TEMPLATE).
    const template = await createDatabase("lg_bench_tpl");
    const tdb = await openDatabase({ databaseUrl: withDatabase(template), dataDir: "", poolSize: 1 });
    await applyMigrations(tdb.adapterFactory);
    await tdb.close();
    const ctx: Ctx = { receiver, masterKey, template };

    await part("ceiling", async () => {
      log("ceiling");
      for (const workers of [1, 4]) rows.push(await ceiling(ctx, workers));
    });
    // The small drains, ours and graphile-worker's alternating run by run when both are wanted
    // (measure.ts alternating): the machine's speed drifts within minutes (graphile-worker's
    // 1-worker drain moved by 61 % between two runs 50 minutes apart), and alternating moves
    // both sides of each pair alike.
    let gw: Graphile | null = null;
    await part("small", async () => {
      log(`ours${want("gw") ? " and graphile-worker alternating" : ""}, ${n(DRAIN)} pending`);
      const small = await oursDatabase(ctx);
      if (want("gw")) gw = await openGraphile(ctx);
      try {
        const scenario = `${n(DRAIN)} pending, all due at once; all drained`;
        for (const workers of [1, 4]) {
          const ours = await oursDrainSide(ctx, small, workers, scenario, (r) => seedBacklog(small, DRAIN, `s${workers}_${r}`));
          rows.push(...(await alternating(gw ? [ours, await gwDrainSide(ctx, gw, workers)] : [ours])));
        }
      } finally {
        await small.db.close();
      }
    });
    await part("big", async () => {
      log(`ours, ${n(BIG)} pending: seeding`);
      const big = await oursDatabase(ctx);
      try {
        log(`seeded ${n(BIG)} events and deliveries (one INSERT … SELECT, VACUUM ANALYZE, CHECKPOINT) in ${(await seedBacklog(big, BIG, "b")).toFixed(1)} s`);
        const last = BIG - (2 * REPEAT - 1) * DRAIN;
        const scenario = `${n(BIG)} pending (${n(last)} at the last run), all due at once; oldest ${n(DRAIN)} timed`;
        for (const workers of [1, 4]) rows.push(await oursDrain(ctx, big, workers, scenario, async () => {}));
      } finally {
        await big.db.close();
      }
    });
    await part("open", async () => {
      log("ours, open loop");
      rows.push(...(await oursOpenLoops(ctx)));
    });
    await part("gw", async () => {
      log("graphile-worker");
      const mine = !gw;
      gw ??= await openGraphile(ctx);
      try {
        if (mine) for (const workers of [1, 4]) rows.push(...(await alternating([await gwDrainSide(ctx, gw, workers)])));
        rows.push(...(await gwOpenLoops(ctx, gw)));
      } finally {
        await gw.close();
      }
    });
    await part("pglite", async () => {
      rows.push(...(await pgliteRows(ctx, log)));
    });
    await part("statements", async () => {
      log("statements");
      costs = await statements(ctx);
    });
  } finally {
    await receiver.close();
    for (const name of created.splice(0).reverse()) await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch((err) => log(`could not drop ${name}: ${err}`));
  }

  printReport(rows, costs, { seconds: Math.round((performance.now() - started) / 1000), loadAtStart, loadAtEnd: load() });
  if (failed.length > 0) {
    console.log(`FAILED: ${failed.join(", ")} (see the log above)`);
    process.exitCode = 1;
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  await main(process.argv.slice(2));
}
