// The comparison: graphile-worker 0.17 doing the same work (the same drains and open loop, the
// same sender in the same number of processes), in its own database on the same server, tuned
// as its performance docs advise (GW_TUNING). Its child side is the "gw" mode of child.ts.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { seal } from "../../src/crypto.ts";
import { admin, createDatabase, withDatabase, withDbCpu } from "./database.ts";
import { drainRun, openLoopRun, received, settle, type DrainSide } from "./measure.ts";
import { childEnv, spawnMany, stopAll } from "./processes.ts";
import { row, senderCpuPerEvent } from "./report.ts";
import { DRAIN, envelope, GW_TUNING, HOOKS, n, OPEN_RATES, OPEN_SECONDS, sleep, type Ctx, type Hook, type Row } from "./shared.ts";

/** graphile-worker's database, its utils, and the child processes' environment. */
export type Graphile = { name: string; env: () => Record<string, string>; utils: WorkerUtils; close(): Promise<void> };
type WorkerUtils = Awaited<ReturnType<typeof import("graphile-worker")["makeWorkerUtils"]>>;

export async function openGraphile(ctx: Ctx): Promise<Graphile> {
  const { Logger, makeWorkerUtils, runMigrations } = await import("graphile-worker");
  const name = await createDatabase("lg_bench_gw");
  const url = withDatabase(name);
  // Our own pool, so that an idle connection ended by DROP DATABASE … FORCE is not an unhandled error.
  const pgPool = new pg.Pool({ connectionString: url, max: 10 });
  pgPool.on("error", () => {});
  pgPool.on("connect", (client) => client.on("error", () => {}));
  const quiet = { logger: new Logger(() => () => {}), pgPool };
  await runMigrations(quiet);
  const utils = await makeWorkerUtils(quiet);
  const hooks: Hook[] = Array.from({ length: HOOKS }, () => ({ url: ctx.receiver.url, secretSealed: seal(ctx.masterKey, "whsec_" + randomBytes(24).toString("base64")) }));
  return {
    name,
    env: () => childEnv(ctx, { BENCH_DATABASE_URL: url, BENCH_HOOKS: JSON.stringify(hooks) }),
    utils,
    async close() {
      await utils.release();
      await pgPool.end();
    },
  };
}

/** graphile-worker's side of a drain: `workers` processes; each run adds DRAIN jobs in one addJobs commit (t0). */
export async function gwDrainSide(ctx: Ctx, gw: Graphile, workers: number): Promise<DrainSide> {
  const pool = await gwPoolSize(workers);
  const children = await spawnMany(workers, "gw", () => ({ ...gw.env(), BENCH_GW_POOL: String(pool) }));
  await sleep(300);
  return {
    async run(r) {
      const specs = Array.from({ length: DRAIN }, (_, i) => {
        const id = `evt_gw${workers}_${r}_${i}`;
        return { identifier: "deliver", payload: { hook: i % HOOKS, id, body: envelope(id, "prj_gw", i) } };
      });
      await settle(ctx.receiver);
      const [[t0, receipts], dbCpu] = await withDbCpu(gw.name, async () => {
        await gw.utils.addJobs(specs);
        const t0 = Date.now();
        return [t0, await received(ctx.receiver, DRAIN, 300_000)] as const;
      });
      return drainRun(t0, receipts, dbCpu);
    },
    finish: async (runs) => row("graphile-worker 0.17", workers, `${n(DRAIN)} jobs added at once (one addJobs commit); all drained${pool < GW_TUNING.maxPoolSize ? `; ${pool} connections per process` : ""}`, runs, await stopAll(children), runs.length * DRAIN),
    stop: () => stopAll(children),
  };
}

/**
 * Connections per graphile-worker process: its docs' concurrency + 1, or the server's free
 * connections shared by the processes when that is fewer. Four processes of 51 asked for 204
 * of a default server's 100 while our idle workers held theirs (the two systems' processes
 * stay started while their runs alternate): its completions failed with "too many clients
 * already" and were retried, which understated its 4-worker drains.
 */
async function gwPoolSize(workers: number): Promise<number> {
  const [{ max, reserved, used }] = await admin<{ max: number; reserved: number; used: number }>(
    `SELECT current_setting('max_connections')::int AS max, current_setting('superuser_reserved_connections')::int AS reserved,
            (SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'client backend') AS used`,
  );
  const margin = 10; // the receiver's checks, the CPU readings, the next run's addJobs
  return Math.max(2, Math.min(GW_TUNING.maxPoolSize, Math.floor((max - reserved - used - margin) / workers)));
}

/** The open loops, one worker process: addJob() per event, each its own commit. */
export async function gwOpenLoops(ctx: Ctx, gw: Graphile): Promise<Row[]> {
  const children = await spawnMany(1, "gw", gw.env);
  try {
    await sleep(300);
    const open: Row[] = [];
    for (const rate of OPEN_RATES) {
      const { run, events } = await openLoopRun(ctx, gw.name, rate, async (i) => {
        const id = `evt_gwopen${rate}_${i}`;
        await gw.utils.addJob("deliver", { hook: 0, id, body: envelope(id, "prj_gw", i) });
        return id;
      });
      open.push(row("graphile-worker 0.17", 1, `open loop: ${n(rate)}/s for ${OPEN_SECONDS} s, addJob() each; events/s achieved`, [run], [], events));
    }
    const report = await stopAll(children);
    for (const r of open) r["sender CPU µs/ev"] = senderCpuPerEvent(report);
    return open;
  } finally {
    await stopAll(children);
  }
}
