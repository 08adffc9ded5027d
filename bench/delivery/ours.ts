// Our worker's rows: the drains and the open loop on Postgres and on PGlite, the bare-loop
// ceiling they are compared with, and the cost of the two hot statements on their own.
import { randomBytes } from "node:crypto";
import { seal } from "../../src/crypto.ts";
import pg from "pg";
import { openDatabase } from "../../src/db/client.ts";
import { newOrderedId } from "../../src/ids.ts";
import { DELIVERY_CHANNEL, envelope } from "../../src/webhooks/outbox.ts";
import { seedWebhook } from "../../test/support/receiver.ts";
import { measureLowerBound } from "../delivery-lower-bound.ts";
import { measureStatements, type StatementCost } from "../delivery-statements.ts";
import { createDatabase, deliveryUpdates, serverUrl, setEnabled, withDatabase, withDbCpu, type OursDb } from "./database.ts";
import { alternating, drainRun, openLoopRun, received, settle, type DrainSide } from "./measure.ts";
import { childEnv, spawnMany, stopAll, type Child } from "./processes.ts";
import { row, senderCpuPerEvent } from "./report.ts";
import {
  BIG_PGLITE,
  CONCURRENCY,
  DRAIN,
  duplicates,
  eventIdOf,
  n,
  OPEN_RATE,
  OPEN_RATES,
  OPEN_SECONDS,
  pct,
  REPEAT,
  sleep,
  type ChildReport,
  type Ctx,
  type Hook,
  type PgliteAnswer,
  type Row,
  type Run,
} from "./shared.ts";

export async function ceiling(ctx: Ctx, processes: number): Promise<Row> {
  const hooks: Hook[] = [{ url: ctx.receiver.url, secretSealed: seal(ctx.masterKey, "whsec_" + randomBytes(24).toString("base64")) }];
  const children = await spawnMany(processes, "bare", (i) => childEnv(ctx, { BENCH_HOOKS: JSON.stringify(hooks), BENCH_COUNT: String(DRAIN / processes), BENCH_TAG: String(i) }));
  try {
    const runs: Run[] = [];
    const reports: ChildReport[] = [];
    for (let r = 0; r < REPEAT; r++) {
      await settle(ctx.receiver);
      const done = Promise.all(children.map((c) => c.nextReport()));
      const t0 = Date.now();
      for (const c of children) c.proc.stdin!.write("go\n");
      const run = drainRun(t0, await received(ctx.receiver, DRAIN, 120_000), null);
      const batch = await done;
      reports.push(...batch);
      const lat = batch.flatMap((b) => b.lat ?? []).sort((a, b) => a - b);
      runs.push({ ...run, p50: pct(lat, 0.5), p99: pct(lat, 0.99) });
    }
    return row("ceiling: bare loop, no db", processes, `${n(DRAIN)} POSTs, ${CONCURRENCY * processes} in flight; p50/p99 = one request`, runs, reports, REPEAT * DRAIN);
  } finally {
    await stopAll(children);
  }
}

export async function oursWorkers(ctx: Ctx, url: string, count: number): Promise<Child[]> {
  const children = await spawnMany(count, "ours", () => childEnv(ctx, { BENCH_DATABASE_URL: url }));
  await sleep(300); // LISTEN connected, first (empty) claim done
  return children;
}

/**
 * Our side: `workers` worker processes on `o`. Before each run, `before(run)` (a new backlog, or
 * nothing); t0 = the commit that enables the webhooks; the first DRAIN deliveries to arrive are
 * timed; then the webhooks are disabled again and the stragglers (claims already made) let through.
 */
export async function oursDrainSide(ctx: Ctx, o: OursDb, workers: number, scenario: string, before: (run: number) => Promise<unknown>): Promise<DrainSide> {
  const updates0 = await deliveryUpdates(o.url);
  const children = await oursWorkers(ctx, o.url, workers);
  return {
    async run(r) {
      await before(r);
      await settle(ctx.receiver);
      const [[t0, receipts], dbCpu] = await withDbCpu(o.name, async () => {
        await setEnabled(o, true); // t0 = the commit, as for graphile-worker's addJobs
        const t0 = Date.now();
        return [t0, await received(ctx.receiver, DRAIN, 300_000)] as const;
      });
      await setEnabled(o, false);
      return drainRun(t0, receipts, dbCpu);
    },
    async finish(runs) {
      const result = row("ours (linkgate)", workers, scenario, runs, await stopAll(children), runs.length * DRAIN);
      const updates = await deliveryUpdates(o.url);
      result["HOT upd"] = `${Math.round((100 * (updates.hot - updates0.hot)) / Math.max(1, updates.upd - updates0.upd))} %`;
      return result;
    },
    stop: () => stopAll(children),
  };
}

/** REPEAT runs of our side alone. */
export async function oursDrain(ctx: Ctx, o: OursDb, workers: number, scenario: string, before: (run: number) => Promise<unknown>): Promise<Row> {
  const [row] = await alternating([await oursDrainSide(ctx, o, workers, scenario, before)]);
  return row;
}

/**
 * The open loops, one per rate of OPEN_RATES, with one worker process on one database. Each
 * event is committed on its own by the statement enqueue() sends (outbox_enqueue: the event, its
 * fan-out to the one webhook and the NOTIFY), as a prepared statement straight on the pg driver,
 * as graphile-worker's addJob() is: through Prisma the load generator itself cost ~0.7 ms of CPU
 * per event (bench/delivery-statements.ts, "enqueue"), 1.4 of the machine's 2 cores at 2,000/s,
 * which measured the generator rather than the delivery.
 */
export async function oursOpenLoops(ctx: Ctx): Promise<Row[]> {
  const name = await createDatabase("lg_bench_ours", ctx.template);
  const url = withDatabase(name);
  const db = await openDatabase({ databaseUrl: url, dataDir: "", poolSize: 2 });
  const hook = await seedWebhook(db, ctx.masterKey, { url: ctx.receiver.url });
  await db.close();
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  pool.on("error", () => {});
  const children = await oursWorkers(ctx, url, 1);
  const rows: Row[] = [];
  try {
    for (const rate of OPEN_RATES) {
      const { run, events } = await openLoopRun(ctx, name, rate, async () => {
        const id = newOrderedId("evt");
        const body = envelope(id, { projectId: hook.projectId, eventType: "user.created", data: { user: { user_id: `acc_${id}` } } });
        await pool.query({
          name: "bench_enqueue",
          text: "SELECT outbox_enqueue($1, ARRAY[$2::text], ARRAY[$3::text], ARRAY['user.created'], ARRAY[$4::text], ARRAY[false], ARRAY[NULL::text])::text",
          values: [DELIVERY_CHANNEL, id, hook.projectId, body],
        });
        return id;
      });
      rows.push(row("ours (linkgate)", 1, `open loop: ${n(rate)}/s for ${OPEN_SECONDS} s, one outbox_enqueue commit each; events/s achieved`, [run], [], events));
    }
    const report = await stopAll(children);
    for (const r of rows) r["sender CPU µs/ev"] = senderCpuPerEvent(report);
    return rows;
  } finally {
    await stopAll(children);
    await pool.end();
  }
}

/** The drains and the open loop on PGlite, in one child that holds the database and the worker. */
export async function pgliteRows(ctx: Ctx, log: (msg: string) => void): Promise<Row[]> {
  const [child] = await spawnMany(1, "pglite", () => childEnv(ctx, { BENCH_HOOK_URL: ctx.receiver.url }));
  const ask = <T,>(line: string): Promise<T> => {
    const answer = child.nextReport<T>();
    child.send(line);
    return answer;
  };
  const drains = async (before: (run: number) => Promise<unknown>): Promise<Run[]> => {
    const runs: Run[] = [];
    for (let r = 0; r < REPEAT; r++) {
      await before(r);
      await settle(ctx.receiver);
      const { t0 } = await ask<PgliteAnswer>("go");
      const receipts = await received(ctx.receiver, DRAIN, 300_000);
      await ask("pause");
      runs.push(drainRun(t0!, receipts, null));
    }
    return runs;
  };
  const system = "ours (linkgate), PGlite";
  const rows: Row[] = [];
  try {
    log(`PGlite, ${n(DRAIN)} pending`);
    const small = await drains((r) => ask(`seed ${DRAIN} s${r}`));
    rows.push(row(system, 1, `${n(DRAIN)} pending, all due at once; all drained`, small, [await ask<ChildReport>("report")], REPEAT * DRAIN));

    log("PGlite, open loop");
    await settle(ctx.receiver);
    const warm = await ask<PgliteAnswer>("warm");
    await received(ctx.receiver, Object.keys(warm.committed!).length, 60_000);
    await settle(ctx.receiver);
    const open = await ask<PgliteAnswer>("open");
    const count = Object.keys(open.committed!).length;
    if (warm.errors! + open.errors! > 0) throw new Error(`${warm.errors! + open.errors!} events could not be committed`);
    const receipts = await received(ctx.receiver, count, 60_000);
    const lat = receipts.map((r) => r.at - open.committed![eventIdOf(r)]).sort((a, b) => a - b);
    const openRun: Run = { rate: count / OPEN_SECONDS, p50: pct(lat, 0.5), p99: pct(lat, 0.99), dup: duplicates(receipts), dbCpuSec: null };
    rows.push(row(system, 1, `open loop: ${OPEN_RATE}/s for ${OPEN_SECONDS} s, enqueue() each; events/s achieved`, [openRun], [await ask<ChildReport>("report")], count));

    log(`PGlite, ${n(BIG_PGLITE)} pending: seeding`);
    log(`PGlite: seeded ${n(BIG_PGLITE)} events and deliveries in ${(await ask<PgliteAnswer>(`seed ${BIG_PGLITE} b`)).seededSec!.toFixed(1)} s`);
    const last = BIG_PGLITE - (REPEAT - 1) * DRAIN;
    const big = await drains(async () => {});
    rows.push(row(system, 1, `${n(BIG_PGLITE)} pending (${n(last)} at the last run), all due at once; oldest ${n(DRAIN)} timed`, big, [await ask<ChildReport>("report")], REPEAT * DRAIN));
    return rows;
  } finally {
    await stopAll([child]);
  }
}

/**
 * CPU per delivery of the two hot statements on their own, on Postgres (bench/delivery-statements.ts),
 * then of the same two in the leanest data model (bench/delivery-lower-bound.ts), run right after
 * so that both see the machine at about the same speed.
 */
export async function statements(ctx: Ctx): Promise<StatementCost[]> {
  const opts = { backlog: 60_000, rounds: 500 };
  const name = await createDatabase("lg_bench_st", ctx.template);
  const ours = await measureStatements(serverUrl(), withDatabase(name), name, opts);
  const bound = await createDatabase("lg_bench_lb");
  return [...ours, ...(await measureLowerBound(serverUrl(), withDatabase(bound), bound, opts))];
}
