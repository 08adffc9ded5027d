// The comparison: graphile-worker 0.17 doing the same work (the same drains and open loop, the
// same sender in the same number of processes), in its own database on the same server, tuned
// as its performance docs advise (GW_TUNING). Its child side is the "gw" mode of child.ts.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { seal } from "../../src/crypto.ts";
import { createDatabase, withDatabase, withDbCpu } from "./database.ts";
import { drainRun, openLoopRun, received, settle } from "./measure.ts";
import { childEnv, spawnMany, stopAll, type Child } from "./processes.ts";
import { row, senderCpuPerEvent } from "./report.ts";
import { DRAIN, envelope, HOOKS, n, OPEN_RATES, OPEN_SECONDS, REPEAT, sleep, type Ctx, type Hook, type Row, type Run } from "./shared.ts";

export async function graphileWorker(ctx: Ctx): Promise<Row[]> {
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
  const env = () => childEnv(ctx, { BENCH_DATABASE_URL: url, BENCH_HOOKS: JSON.stringify(hooks) });
  const rows: Row[] = [];
  const children: Child[] = [];
  try {
    for (const workers of [1, 4]) {
      children.push(...(await spawnMany(workers, "gw", env)));
      await sleep(300);
      const runs: Run[] = [];
      for (let r = 0; r < REPEAT; r++) {
        const specs = Array.from({ length: DRAIN }, (_, i) => {
          const id = `evt_gw${workers}_${r}_${i}`;
          return { identifier: "deliver", payload: { hook: i % HOOKS, id, body: envelope(id, "prj_gw", i) } };
        });
        await settle(ctx.receiver);
        const [[t0, receipts], dbCpu] = await withDbCpu(name, async () => {
          await utils.addJobs(specs);
          const t0 = Date.now();
          return [t0, await received(ctx.receiver, DRAIN, 300_000)] as const;
        });
        runs.push(drainRun(t0, receipts, dbCpu));
      }
      rows.push(row("graphile-worker 0.17", workers, `${n(DRAIN)} jobs added at once (one addJobs commit); all drained`, runs, await stopAll(children), REPEAT * DRAIN));
    }

    children.push(...(await spawnMany(1, "gw", env)));
    await sleep(300);
    const open: Row[] = [];
    for (const rate of OPEN_RATES) {
      const { run, events } = await openLoopRun(ctx, name, rate, async (i) => {
        const id = `evt_gwopen${rate}_${i}`;
        await utils.addJob("deliver", { hook: 0, id, body: envelope(id, "prj_gw", i) });
        return id;
      });
      open.push(row("graphile-worker 0.17", 1, `open loop: ${n(rate)}/s for ${OPEN_SECONDS} s, addJob() each; events/s achieved`, [run], [], events));
    }
    const report = await stopAll(children);
    for (const r of open) r["sender CPU µs/ev"] = senderCpuPerEvent(report);
    rows.push(...open);
    return rows;
  } finally {
    await stopAll(children);
    await utils.release();
    await pgPool.end();
  }
}
