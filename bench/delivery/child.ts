// The program each sending process runs (processes.ts starts it with `--child=<mode>`): our
// worker against Postgres ("ours"), graphile-worker ("gw"), the bare loop of the ceiling
// ("bare"), or PGlite with its database, backlogs and worker all in this one process ("pglite").
// It prints "ready" once warmed up, then its reports as JSON lines on stdout.
import { randomBytes } from "node:crypto";
import { createInterface } from "node:readline";
import { parseMasterKey, seal, unseal, type MasterKey } from "../../src/crypto.ts";
import { openDatabase, type Tx } from "../../src/db/client.ts";
import { applyMigrations } from "../../src/db/migrations.ts";
import { createSender } from "../../src/delivery/sender.ts";
import { startWorker } from "../../src/delivery/worker.ts";
import { enqueue } from "../../src/webhooks/outbox.ts";
import { liveSecrets } from "../../src/webhooks/signing.ts";
import { seedWebhook } from "../../test/support/receiver.ts";
import { openLoop } from "../load.ts";
import { seedBacklog, seedHooks, setEnabled } from "./database.ts";
import {
  BATCH,
  CONCURRENCY,
  CONFIG,
  envelope,
  GW_TUNING,
  OPEN_RATE,
  OPEN_SECONDS,
  OPEN_WARMUP_SECONDS,
  PER_WEBHOOK_CAP,
  POOL,
  SEED_CHUNK,
  WARMUP,
  type ChildReport,
  type Hook,
  type PgliteAnswer,
} from "./shared.ts";

/** In a child: one delivery as every system does it. */
function makeDeliver(masterKey: MasterKey) {
  const sender = createSender({ timeoutMs: CONFIG.webhookTimeoutMs, allowPrivate: true });
  const unsealed = new Map<string, string>(); // as the worker caches them
  const open = (sealed: string) => unsealed.get(sealed) ?? unsealed.set(sealed, unseal(masterKey, sealed)).get(sealed)!;
  const deliver = async (hook: Hook, eventId: string, body: string, attempt: number): Promise<number> => {
    const secrets = liveSecrets({ secret: open(hook.secretSealed), previousSecret: null, previousSecretExpiresAt: null }, new Date());
    const r = await sender.send({ url: hook.url, body, eventId, eventType: "user.created", attempt, secrets });
    if (r.statusCode !== 200) throw new Error(r.error ?? `HTTP ${r.statusCode}`);
    return r.durationMs;
  };
  return { deliver, close: () => sender.close() };
}

/** WARMUP signed POSTs, CONCURRENCY at a time, before a child reports ready. */
async function warmUp(masterKey: MasterKey, url: string): Promise<void> {
  const { deliver, close } = makeDeliver(masterKey);
  const hook = { url, secretSealed: seal(masterKey, "whsec_" + randomBytes(24).toString("base64")) };
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < WARMUP) {
        const id = `evt_warmup_${process.pid}_${next++}`;
        await deliver(hook, id, envelope(id, "prj_warmup", next), 1);
      }
    }),
  );
  await close();
}

async function childMain(mode: string): Promise<void> {
  const env = process.env;
  const masterKey = parseMasterKey(env.BENCH_MASTER_KEY!);
  await warmUp(masterKey, env.BENCH_RECEIVER_URL!);
  let cpu0 = process.cpuUsage();
  const cpuUs = () => {
    const c = process.cpuUsage(cpu0);
    return c.user + c.system;
  };
  const onTerm = (fn: () => Promise<ChildReport>) =>
    process.once("SIGTERM", () => {
      fn().then(
        (report) => {
          console.log(JSON.stringify(report));
          process.exit(0);
        },
        (err) => {
          console.error(err);
          process.exit(1);
        },
      );
    });

  if (mode === "ours") {
    const db = await openDatabase({ databaseUrl: env.BENCH_DATABASE_URL!, dataDir: "", poolSize: POOL });
    const w = startWorker({ db, config: CONFIG, masterKey, concurrency: CONCURRENCY, batchSize: BATCH, perWebhookCap: PER_WEBHOOK_CAP, maintenanceIntervalMs: 0 });
    onTerm(async () => {
      await w.stop();
      const report = { cpuUs: cpuUs(), events: w.stats.succeeded };
      await db.close();
      return report;
    });
    cpu0 = process.cpuUsage();
    console.log("ready");
    return;
  }

  if (mode === "pglite") {
    await pgliteChild(masterKey, env.BENCH_HOOK_URL!);
    return;
  }

  const hooks = JSON.parse(env.BENCH_HOOKS!) as Hook[];
  const { deliver, close } = makeDeliver(masterKey);

  if (mode === "gw") {
    const { run, Logger } = await import("graphile-worker");
    const logger = new Logger(() => (level, message) => {
      if (level === "error") console.error(`graphile-worker: ${message}`);
    });
    let done = 0;
    const runner = await run({
      connectionString: env.BENCH_DATABASE_URL!,
      concurrency: GW_TUNING.concurrency,
      maxPoolSize: Number(env.BENCH_GW_POOL ?? GW_TUNING.maxPoolSize),
      pollInterval: GW_TUNING.pollInterval,
      noPreparedStatements: GW_TUNING.noPreparedStatements,
      noHandleSignals: true,
      logger,
      preset: {
        worker: { localQueue: GW_TUNING.localQueue, completeJobBatchDelay: GW_TUNING.completeJobBatchDelay, failJobBatchDelay: GW_TUNING.failJobBatchDelay },
      },
      taskList: {
        deliver: async (payload, helpers) => {
          const p = payload as { hook: number; id: string; body: string };
          await deliver(hooks[p.hook], p.id, p.body, helpers.job.attempts);
          done++;
        },
      },
    });
    onTerm(async () => {
      await runner.stop();
      await close();
      return { cpuUs: cpuUs(), events: done };
    });
    cpu0 = process.cpuUsage();
    console.log("ready");
    return;
  }

  // bare: for every "go" line on stdin, BENCH_COUNT bodies with CONCURRENCY in flight, then a
  // report line; it ends with its stdin (or SIGTERM).
  const count = Number(env.BENCH_COUNT);
  let round = 0;
  process.once("SIGTERM", () => process.exit(0));
  console.log("ready");
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() !== "go") continue;
    const bodies = Array.from({ length: count }, (_, i) => {
      const id = `evt_bare_${env.BENCH_TAG ?? "0"}_${round}_${i}`;
      return { id, body: envelope(id, "prj_bare", i) };
    });
    round++;
    cpu0 = process.cpuUsage();
    const lat: number[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < count) {
          const i = next++;
          lat.push(await deliver(hooks[i % hooks.length], bodies[i].id, bodies[i].body, 1));
        }
      }),
    );
    console.log(JSON.stringify({ cpuUs: cpuUs(), events: count, lat } satisfies ChildReport));
  }
  await close();
  process.exit(0);
}

/**
 * The PGlite child: its own in-memory database, the webhooks, the backlogs and the worker, all
 * in this process (PGlite is one process's database). It obeys one command per stdin line and
 * answers each with one JSON line: `seed <count> <tag>` → {seededSec}; `go` (enable the drain
 * webhooks) → {t0}; `pause` → {}; `warm` / `open` (the open loop's warm-up, then its measured
 * part, committed here) → {committed: id → commit time, errors}; `report` → the CPU and
 * deliveries counted since the last report. They are counted only between go and pause and
 * during `open`, so seeding and warm-up stay out of them.
 */
async function pgliteChild(masterKey: MasterKey, hookUrl: string): Promise<void> {
  const db = await openDatabase({ dataDir: "memory://" });
  await applyMigrations(db.adapterFactory);
  const drain = await seedHooks(db, masterKey, hookUrl);
  const openHook = await seedWebhook(db, masterKey, { url: hookUrl });
  const w = startWorker({ db, config: CONFIG, masterKey, concurrency: CONCURRENCY, batchSize: BATCH, perWebhookCap: PER_WEBHOOK_CAP, maintenanceIntervalMs: 0 });
  let counted = { cpuUs: 0, events: 0 };
  let window: { cpu: NodeJS.CpuUsage; events: number } | null = null;
  const openWindow = () => (window = { cpu: process.cpuUsage(), events: w.stats.succeeded });
  const closeWindow = () => {
    if (!window) return;
    const c = process.cpuUsage(window.cpu);
    counted = { cpuUs: counted.cpuUs + c.user + c.system, events: counted.events + w.stats.succeeded - window.events };
    window = null;
  };
  const say = (answer: PgliteAnswer | ChildReport) => console.log(JSON.stringify(answer));
  // enqueue() with the client as its transaction, as the Postgres open loop does.
  const autocommit = db.prisma as unknown as Tx;
  let i = 0;
  const openLoopHere = async (seconds: number) => {
    const committed: Record<string, number> = {};
    const load = await openLoop(OPEN_RATE, seconds, async () => {
      const id = await enqueue(autocommit, { projectId: openHook.projectId, eventType: "user.created", data: { user: { user_id: `acc_${i++}` } } });
      committed[id] = Date.now();
    });
    return { committed, errors: load.errors };
  };
  process.once("SIGTERM", () => {
    closeWindow();
    void w.stop().then(() => {
      say(counted);
      process.exit(0);
    });
  });
  console.log("ready");
  for await (const line of createInterface({ input: process.stdin })) {
    const [command, ...args] = line.trim().split(" ");
    if (command === "seed") say({ seededSec: await seedBacklog(drain, Number(args[0]), args[1], SEED_CHUNK) });
    else if (command === "go") {
      openWindow();
      await setEnabled(drain, true);
      say({ t0: Date.now() });
    } else if (command === "pause") {
      closeWindow();
      await setEnabled(drain, false);
      say({});
    } else if (command === "report") {
      say(counted);
      counted = { cpuUs: 0, events: 0 };
    } else if (command === "warm") say(await openLoopHere(OPEN_WARMUP_SECONDS));
    else if (command === "open") {
      openWindow();
      const answer = await openLoopHere(OPEN_SECONDS);
      closeWindow();
      say(answer);
    }
  }
}


const mode = process.argv.find((a) => a.startsWith("--child="))?.slice("--child=".length);
if (!mode) throw new Error("bench/delivery/child.ts runs as a child of bench/delivery/index.ts (--child=<mode>)");
await childMain(mode);
