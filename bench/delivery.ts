// Delivery engine benchmark: `npm run bench -- delivery`, or
// `npx tsx bench/delivery.ts [--only=ceiling,small,big,open,gw,pglite,statements]`.
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
//   database on the same server, tuned as its performance docs advise (GW_TUNING).
// * ceiling: a bare loop with no database: DRAIN POSTs, CONCURRENCY in flight per process.
//   p50/p99 are single request times (there is no queue).
// * open loop: OPEN_RATE events a second for OPEN_SECONDS (after OPEN_WARMUP_SECONDS not
//   counted), each committed on its own (ours: enqueue(), fanned out to one webhook;
//   graphile-worker: addJob()), 1 worker process: p50/p99 of commit → receipt.
// * PGlite: the same drains (1 worker: PGlite is one process's database, so the worker, its
//   database and the seeding all live in one child) and the open loop, whose events are
//   committed in that child too.
// * CPU columns, per delivered event: the sending processes' CPU (process.cpuUsage, from start
//   to stop, all runs; for PGlite that includes the database), that of the database's backends
//   (from /proc, Linux only; timed part of the runs only) and the receiver's (this process,
//   from t0 to the last counted receipt; drains only).
// * statements: CPU per delivery of the claim and of the recording of results on their own
//   (bench/delivery-statements.ts), and the share of HOT updates of `deliveries` over them.
//
// For trying changes: --only=…; BENCH_DELIVERY_BIG (the big backlog), BENCH_DELIVERY_BATCH and
// BENCH_DELIVERY_POOL (our worker's claim size and connections); BENCH_CHILD_NODE_ARGS (node
// flags for the children, e.g. "--cpu-prof --cpu-prof-dir=tmp/prof"); BENCH_DELIVERY_COMMITS=1
// (print the transactions each timed run committed).
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";
import pg from "pg";
import { parseMasterKey, seal, unseal, type MasterKey } from "../src/crypto.ts";
import { openDatabase, type Database, type Tx } from "../src/db/client.ts";
import { applyMigrations } from "../src/db/migrations.ts";
import { DELIVERY_CHANNEL, enqueue } from "../src/webhooks/outbox.ts";
import { createSender } from "../src/delivery/sender.ts";
import { startWorker } from "../src/delivery/worker.ts";
import { liveSecrets } from "../src/webhooks/signing.ts";
import { measureStatements, type StatementCost } from "./delivery-statements.ts";
import { openLoop } from "./load.ts";
import { newMasterKey, seedWebhook, TestReceiver, type Receipt } from "../test/support/receiver.ts";

const CONFIG = { retryScheduleMs: [1_000, 2_000, 3_000, 4_000, 5_000], webhookTimeoutMs: 5_000, webhookAllowPrivate: true };
/** Sends in flight per process, for every system measured. */
const CONCURRENCY = 50;
/** Our worker: deliveries per claim (and prefetched; at most CONCURRENCY), per-webhook cap, connections per process. */
const BATCH = Number(process.env.BENCH_DELIVERY_BATCH ?? 50);
const PER_WEBHOOK_CAP = 20; // 10 webhooks x 20 = room for 4 workers x 50 in flight
const POOL = Number(process.env.BENCH_DELIVERY_POOL ?? 4);
const HOOKS = 10;
const DRAIN = 10_000;
/** The big backlog; BENCH_DELIVERY_BIG overrides it for a quick trial. */
const BIG = Number(process.env.BENCH_DELIVERY_BIG ?? 1_000_000);
/**
 * PGlite's big backlog. An in-memory PGlite holds ~3.3 KB per pending delivery (event, delivery,
 * their indexes), so a million would need ~3.3 GB, past what its WebAssembly memory can address;
 * on a file-backed PGlite, seeding a million took over ten minutes (both tried). 200,000 is
 * twenty times the small backlog, enough to show whether the claim's cost grows with it.
 */
const BIG_PGLITE = Number(process.env.BENCH_DELIVERY_BIG_PGLITE ?? 200_000);
/** PGlite seeds in statements of at most this many rows (one statement of a million did not finish). */
const SEED_CHUNK = 50_000;
const OPEN_RATE = 500;
const OPEN_SECONDS = 10;
const OPEN_WARMUP_SECONDS = 2;
const WARMUP = 2_000;
/** Timed runs per throughput row (the median is shown): other load on the machine varies. */
const REPEAT = 5;
/** graphile-worker as worker.graphile.org/docs/performance tunes it for throughput. */
const GW_TUNING = {
  concurrency: CONCURRENCY, // concurrentJobs
  maxPoolSize: CONCURRENCY + 1, // "concurrency + 1"
  pollInterval: 1_000, // only for future/retried jobs; new ones arrive by LISTEN/NOTIFY (ours: same 1 s backstop)
  noPreparedStatements: false, // prepared statements on
  localQueue: { size: 500 }, // jobs fetched and locked in batches (the docs' perf setup)
  completeJobBatchDelay: 0, // completions batched
  failJobBatchDelay: 0,
};

type Row = {
  system: string;
  workers: number;
  scenario: string;
  "events/s": number;
  runs: string;
  "p50 ms": number;
  "p99 ms": number;
  "sender CPU µs/ev": number | string;
  "db CPU µs/ev": number | string;
  "receiver CPU µs/ev": number | string;
  /** Of the UPDATEs of `deliveries` over the runs, the share that were HOT. */
  "HOT upd": string;
  dup: number;
};
type Hook = { url: string; secretSealed: string };
type ChildReport = { cpuUs: number; events: number; lat?: number[] };
/** What the PGlite child answers to a command (one JSON line each). */
type PgliteAnswer = { t0?: number; seededSec?: number; committed?: Record<string, number>; errors?: number };

const pct = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
const round1 = (n: number) => Math.round(n * 10) / 10;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const eventIdOf = (r: Receipt) => String(r.headers["x-service-event-id"]);
const duplicates = (rs: Receipt[]) => rs.length - new Set(rs.map(eventIdOf)).size;
const n = (x: number) => x.toLocaleString("en");
/** 1,000,000 → "1M", 200,000 → "200k". */
const short = (x: number) => (x % 1_000_000 === 0 ? `${x / 1_000_000}M` : `${x / 1_000}k`);

/** The envelope enqueue() writes (outbox.ts): same fields, same size. */
const envelope = (id: string, projectId: string, i: number) =>
  JSON.stringify({ id, event_type: "user.created", created_at: new Date().toISOString(), project_id: projectId, data: { user: { user_id: `acc_${i}` } } });

// ---- databases ---------------------------------------------------------------------------------

const serverUrl = () => process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";

function withDatabase(name: string): string {
  const u = new URL(serverUrl());
  u.pathname = `/${name}`;
  return u.toString();
}

async function admin<T extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: serverUrl() });
  await client.connect();
  try {
    return (await client.query<T>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

/** Databases this run created; all dropped at the end. */
const created: string[] = [];
async function createDatabase(prefix: string, template?: string): Promise<string> {
  const name = `${prefix}_${randomBytes(4).toString("hex")}`;
  // A template must have no sessions: end any that linger (e.g. a migration connection closing late).
  if (template) await admin(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [template]);
  await admin(`CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ""}`);
  created.push(name);
  return name;
}

/**
 * Updates of `deliveries` in the database at `url` so far, and how many were HOT. The workers'
 * backends report theirs when they end (or idle, at most once a second): read after stopping them.
 */
async function deliveryUpdates(url: string): Promise<{ upd: number; hot: number }> {
  await sleep(1_100);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ upd: string; hot: string }>(`SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE relname = 'deliveries'`);
    return { upd: Number(rows[0]?.upd ?? 0), hot: Number(rows[0]?.hot ?? 0) };
  } finally {
    await client.end();
  }
}

/** CPU seconds used so far by each backend connected to `database` (empty where /proc is not readable). */
async function backendCpu(database: string): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  for (const { pid } of await admin<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = $1`, [database])) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.set(pid, (Number(f[11]) + Number(f[12])) / 100); // utime + stime, in USER_HZ (100 on Linux)
    } catch {
      // not Linux, or the backend just ended
    }
  }
  return out;
}

// ---- child processes ---------------------------------------------------------------------------

type ChildMode = "ours" | "gw" | "bare" | "pglite";
type Child = { proc: ChildProcess; nextReport: <T = ChildReport>() => Promise<T>; send: (line: string) => void; stop: () => Promise<ChildReport> };

/**
 * Starts this file in a child process in `mode`; resolves once it prints "ready". A child prints
 * its reports as JSON lines: nextReport() waits for the next one; stop() ends its stdin, sends
 * SIGTERM, waits for it to exit (SIGKILL after 15 s) and returns its last report.
 */
async function spawnChild(mode: ChildMode, env: Record<string, string>): Promise<Child> {
  // BENCH_CHILD_NODE_ARGS: extra node flags for the children, e.g. "--cpu-prof --cpu-prof-dir=tmp/prof".
  const extra = process.env.BENCH_CHILD_NODE_ARGS?.split(" ").filter(Boolean) ?? [];
  const proc = spawn(process.execPath, [...extra, "--import", "tsx", fileURLToPath(import.meta.url), `--child=${mode}`], {
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const reports: ChildReport[] = [];
  const waiting: ((r: never) => void)[] = [];
  let buffered = "";
  let ready!: () => void;
  const started = new Promise<void>((resolve) => (ready = resolve));
  proc.stdout!.on("data", (d: Buffer) => {
    buffered += d.toString();
    let nl: number;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, nl).trim();
      buffered = buffered.slice(nl + 1);
      if (line === "ready") ready();
      else if (line.startsWith("{")) {
        const report = JSON.parse(line);
        reports.push(report);
        waiting.shift()?.(report as never);
      }
    }
  });
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  await Promise.race([started, exited.then((code) => Promise.reject(new Error(`bench ${mode} child exited with ${code}`)))]);
  return {
    proc,
    nextReport: <T,>() => new Promise<T>((resolve) => waiting.push(resolve as (r: never) => void)),
    send: (line) => void proc.stdin!.write(`${line}\n`),
    async stop() {
      if (proc.exitCode === null) {
        proc.stdin!.end();
        proc.kill("SIGTERM");
      }
      const timer = setTimeout(() => proc.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(timer);
      return reports[reports.length - 1] ?? { cpuUs: NaN, events: 0 };
    },
  };
}

async function stopAll(children: Child[]): Promise<ChildReport[]> {
  return Promise.all(children.splice(0).map((c) => c.stop()));
}

const senderCpuPerEvent = (reports: ChildReport[]) => {
  const cpu = reports.reduce((s, r) => s + r.cpuUs, 0);
  const events = reports.reduce((s, r) => s + r.events, 0);
  return events > 0 && Number.isFinite(cpu) ? Math.round(cpu / events) : "-";
};

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
      maxPoolSize: GW_TUNING.maxPoolSize,
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

// ---- scenarios ---------------------------------------------------------------------------------

type Ctx = { receiver: TestReceiver; masterKey: MasterKey; template: string };
/** One timed run: events/s, latency percentiles, duplicates, database and receiver CPU seconds (null: unknown). */
type Run = { rate: number; p50: number; p99: number; dup: number; dbCpuSec: number | null; recvCpuSec?: number | null };

const childEnv = (ctx: Ctx, more: Record<string, string> = {}) => ({
  BENCH_MASTER_KEY: ctx.masterKey.raw.toString("base64"),
  BENCH_RECEIVER_URL: ctx.receiver.url.replace(/\/hook$/, "/warmup"),
  ...more,
});

async function spawnMany(count: number, mode: ChildMode, env: (i: number) => Record<string, string>): Promise<Child[]> {
  const children: Child[] = [];
  try {
    // One at a time: their warm-ups would otherwise compete with each other.
    for (let i = 0; i < count; i++) children.push(await spawnChild(mode, env(i)));
  } catch (err) {
    await stopAll(children);
    throw err;
  }
  return children;
}

/**
 * Waits until the receiver has `count` requests (bounded), then returns the first `count` and
 * the CPU seconds this process (the receiver, otherwise idle) used meanwhile.
 */
async function received(receiver: TestReceiver, count: number, timeoutMs: number): Promise<Receipt[] & { recvCpuSec: number }> {
  const cpu0 = process.cpuUsage();
  await receiver.waitFor(count, timeoutMs);
  const cpu = process.cpuUsage(cpu0);
  return Object.assign(receiver.receipts.slice(0, count), { recvCpuSec: (cpu.user + cpu.system) / 1e6 });
}

/** Waits until no request has arrived for `quietMs` (a run's stragglers), then forgets them all. */
async function settle(receiver: TestReceiver, quietMs = 300): Promise<void> {
  for (let seen = -1; seen !== receiver.receipts.length; ) {
    seen = receiver.receipts.length;
    await sleep(quietMs);
  }
  receiver.receipts.length = 0;
}

/** fn's result, and the CPU seconds the backends connected to `database` used meanwhile (null: /proc not readable). */
async function withDbCpu<T>(database: string, fn: () => Promise<T>): Promise<[T, number | null]> {
  const commits = process.env.BENCH_DELIVERY_COMMITS ? await committed(database) : 0;
  const before = await backendCpu(database);
  const result = await fn();
  const after = await backendCpu(database);
  if (process.env.BENCH_DELIVERY_COMMITS) console.error(`[bench delivery] ${database}: ${(await committed(database)) - commits} transactions committed during the run`);
  if (after.size === 0) return [result, null];
  let s = 0;
  for (const [pid, t] of after) s += t - (before.get(pid) ?? 0);
  return [result, s];
}

/**
 * Transactions committed in `database` so far (BENCH_DELIVERY_COMMITS=1 prints them per run: a
 * claim and a record are one each, so per drained event they show how large the batches were).
 * Backends report their counts when idle, at most once a second: wait for that first.
 */
async function committed(database: string): Promise<number> {
  await new Promise((r) => setTimeout(r, 1_500));
  const [row] = await admin<{ n: string }>(`SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = $1`, [database]);
  return Number(row?.n ?? 0);
}

/** A drain run: receipts counted from t0, the commit that made them all due. */
function drainRun(t0: number, receipts: Receipt[] & { recvCpuSec: number }, dbCpuSec: number | null): Run {
  const lat = receipts.map((r) => r.at - t0).sort((a, b) => a - b);
  const seconds = (receipts[receipts.length - 1].at - t0) / 1000;
  return { rate: receipts.length / seconds, p50: pct(lat, 0.5), p99: pct(lat, 0.99), dup: duplicates(receipts), dbCpuSec, recvCpuSec: receipts.recvCpuSec };
}

/** A row from its runs: the median run's figures, all runs' events/s, CPU per event over all runs. */
function row(system: string, workers: number, scenario: string, runs: Run[], reports: ChildReport[], events: number): Row {
  const median = [...runs].sort((a, b) => a.rate - b.rate)[Math.floor(runs.length / 2)];
  const perEvent = (sec: (r: Run) => number | null | undefined) =>
    runs.every((r) => typeof sec(r) === "number") ? Math.round((runs.reduce((s, r) => s + sec(r)!, 0) * 1e6) / events) : "-";
  return {
    system,
    workers,
    scenario,
    "events/s": Math.round(median.rate),
    runs: runs.length > 1 ? runs.map((r) => Math.round(r.rate)).join(" ") : "-",
    "p50 ms": round1(median.p50),
    "p99 ms": round1(median.p99),
    "sender CPU µs/ev": senderCpuPerEvent(reports),
    "db CPU µs/ev": perEvent((r) => r.dbCpuSec),
    "receiver CPU µs/ev": perEvent((r) => r.recvCpuSec),
    "HOT upd": "-",
    dup: runs.reduce((s, r) => s + r.dup, 0),
  };
}

async function ceiling(ctx: Ctx, processes: number): Promise<Row> {
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

/** HOOKS webhooks of one project pointing at the receiver, disabled until a run starts. */
type Backlog = { db: Database; projectId: string; hookIds: string[] };
type OursDb = Backlog & { name: string; url: string };

async function seedHooks(db: Database, masterKey: MasterKey, url: string): Promise<Backlog> {
  const first = await seedWebhook(db, masterKey, { url, enabled: false });
  const hookIds = [first.webhookId];
  for (let i = 1; i < HOOKS; i++) hookIds.push((await seedWebhook(db, masterKey, { url, projectId: first.projectId, enabled: false })).webhookId);
  return { db, projectId: first.projectId, hookIds };
}

/** A copy of the migrated template with HOOKS webhooks (disabled) pointing at the receiver. */
async function oursDatabase(ctx: Ctx): Promise<OursDb> {
  const name = await createDatabase("lg_bench_ours", ctx.template);
  const url = withDatabase(name);
  const db = await openDatabase({ databaseUrl: url, dataDir: "", poolSize: 4 });
  return { name, url, ...(await seedHooks(db, ctx.masterKey, ctx.receiver.url)) };
}

/** `count` events and their deliveries, round-robin over the webhooks, in one statement each `chunk`; then VACUUM ANALYZE and CHECKPOINT. */
async function seedBacklog(o: Backlog, count: number, tag: string, chunk = count): Promise<number> {
  const t = performance.now();
  for (let done = 0, part = 0; done < count; done += chunk, part++) await insertBacklog(o, Math.min(chunk, count - done), count > chunk ? `${tag}${part}` : tag);
  await o.db.prisma.$executeRawUnsafe("VACUUM ANALYZE outbox_events");
  await o.db.prisma.$executeRawUnsafe("VACUUM ANALYZE deliveries");
  // Write the seed out now (superuser only; skipped otherwise): a backlog that built up over time
  // has long been checkpointed, while a fresh 1,000,000-row seed would otherwise be flushed by
  // the checkpointer during the measurement.
  await o.db.prisma.$executeRawUnsafe("CHECKPOINT").catch(() => {});
  return (performance.now() - t) / 1000;
}

async function insertBacklog(o: Backlog, count: number, tag: string): Promise<void> {
  await o.db.prisma.$executeRaw`
    WITH ev AS (
      INSERT INTO outbox_events (id, project_id, event_type, body)
      SELECT 'evt_' || ${tag}::text || '_' || i, ${o.projectId}, 'user.created',
             json_build_object('id', 'evt_' || ${tag}::text || '_' || i, 'event_type', 'user.created',
                               'created_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                               'project_id', ${o.projectId}::text, 'data', json_build_object('user', json_build_object('user_id', 'acc_' || i)))::text
      FROM generate_series(1, ${count}::int) i
      RETURNING id, seq
    )
    INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type)
    SELECT 'dlv_' || substr(ev.id, 5), ev.id, (${o.hookIds}::text[])[(1 + ev.seq % ${HOOKS}::int)::int], ${o.projectId}, 'user.created'
    FROM ev`;
}

/** One statement: the webhooks' state and, when enabling, the NOTIFY that wakes the workers at commit. */
async function setEnabled(o: Backlog, enabled: boolean): Promise<void> {
  await o.db.prisma.$queryRaw`
    WITH u AS (UPDATE webhooks SET enabled = ${enabled} WHERE id = ANY (${o.hookIds}::text[]) RETURNING 1)
    SELECT pg_notify(${DELIVERY_CHANNEL}, '')::text FROM (SELECT 1 FROM u LIMIT 1) AS x WHERE ${enabled}`;
}

async function oursWorkers(ctx: Ctx, url: string, count: number): Promise<Child[]> {
  const children = await spawnMany(count, "ours", () => childEnv(ctx, { BENCH_DATABASE_URL: url }));
  await sleep(300); // LISTEN connected, first (empty) claim done
  return children;
}

/**
 * REPEAT runs with `workers` worker processes. Before each, `before(run)` (a new backlog, or
 * nothing); t0 = the commit that enables the webhooks; the first DRAIN deliveries to arrive are
 * timed; then the webhooks are disabled again and the stragglers (claims already made) let through.
 */
async function oursDrain(ctx: Ctx, o: OursDb, workers: number, scenario: string, before: (run: number) => Promise<unknown>): Promise<Row> {
  const updates0 = await deliveryUpdates(o.url);
  const children = await oursWorkers(ctx, o.url, workers);
  try {
    const runs: Run[] = [];
    for (let r = 0; r < REPEAT; r++) {
      await before(r);
      await settle(ctx.receiver);
      const [[t0, receipts], dbCpu] = await withDbCpu(o.name, async () => {
        await setEnabled(o, true); // t0 = the commit, as for graphile-worker's addJobs
        const t0 = Date.now();
        return [t0, await received(ctx.receiver, DRAIN, 300_000)] as const;
      });
      await setEnabled(o, false);
      runs.push(drainRun(t0, receipts, dbCpu));
    }
    const result = row("ours (linkgate)", workers, scenario, runs, await stopAll(children), REPEAT * DRAIN);
    const updates = await deliveryUpdates(o.url);
    result["HOT upd"] = `${Math.round((100 * (updates.hot - updates0.hot)) / Math.max(1, updates.upd - updates0.upd))} %`;
    return result;
  } finally {
    await stopAll(children);
  }
}

/**
 * The open loop: OPEN_WARMUP_SECONDS at OPEN_RATE first, not counted (a fresh worker plans its
 * statements and warms its code; that second of start-up would otherwise be the p99), then
 * OPEN_SECONDS measured. `produce(i)` commits event i and returns its id.
 */
async function openLoopRun(ctx: Ctx, database: string, produce: (i: number) => Promise<string>): Promise<{ run: Run; events: number }> {
  const committedAt = new Map<string, number>();
  let i = 0;
  const once = async () => {
    const id = await produce(i++);
    committedAt.set(id, Date.now());
  };
  await settle(ctx.receiver);
  const warm = await openLoop(OPEN_RATE, OPEN_WARMUP_SECONDS, once);
  await received(ctx.receiver, warm.count, 60_000);
  await settle(ctx.receiver);
  const [[load, receipts], dbCpuSec] = await withDbCpu(database, async () => {
    const load = await openLoop(OPEN_RATE, OPEN_SECONDS, once);
    return [load, await received(ctx.receiver, load.count, 60_000)] as const;
  });
  if (warm.errors + load.errors > 0) throw new Error(`${warm.errors + load.errors} events could not be committed`);
  const lat = receipts.map((r) => r.at - committedAt.get(eventIdOf(r))!).sort((a, b) => a - b);
  return { run: { rate: load.rps, p50: pct(lat, 0.5), p99: pct(lat, 0.99), dup: duplicates(receipts), dbCpuSec }, events: load.count };
}

async function oursOpenLoop(ctx: Ctx): Promise<Row> {
  const name = await createDatabase("lg_bench_ours", ctx.template);
  const url = withDatabase(name);
  const db = await openDatabase({ databaseUrl: url, dataDir: "", poolSize: 10 });
  const hook = await seedWebhook(db, ctx.masterKey, { url: ctx.receiver.url });
  const children = await oursWorkers(ctx, url, 1);
  try {
    // enqueue() given the client itself as its transaction: the event, its fan-out and the
    // NOTIFY commit as one statement (like addJob()), without the extra round trips of an
    // interactive Prisma transaction, so that the load generator is not what saturates.
    const autocommit = db.prisma as unknown as Tx;
    const { run, events } = await openLoopRun(ctx, name, (i) =>
      enqueue(autocommit, { projectId: hook.projectId, eventType: "user.created", data: { user: { user_id: `acc_${i}` } } }),
    );
    return row("ours (linkgate)", 1, `open loop: ${OPEN_RATE}/s for ${OPEN_SECONDS} s, enqueue() each; events/s achieved`, [run], await stopAll(children), events);
  } finally {
    await stopAll(children);
    await db.close();
  }
}

/** The drains and the open loop on PGlite, in one child that holds the database and the worker. */
async function pgliteRows(ctx: Ctx, log: (msg: string) => void): Promise<Row[]> {
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

/** CPU per delivery of the two hot statements on their own, on Postgres (bench/delivery-statements.ts). */
async function statements(ctx: Ctx): Promise<StatementCost[]> {
  const name = await createDatabase("lg_bench_st", ctx.template);
  return measureStatements(serverUrl(), withDatabase(name), name, { backlog: 60_000, rounds: 500 });
}

async function graphileWorker(ctx: Ctx): Promise<Row[]> {
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
    const { run, events } = await openLoopRun(ctx, name, async (i) => {
      const id = `evt_gwopen_${i}`;
      await utils.addJob("deliver", { hook: 0, id, body: envelope(id, "prj_gw", i) });
      return id;
    });
    rows.push(row("graphile-worker 0.17", 1, `open loop: ${OPEN_RATE}/s for ${OPEN_SECONDS} s, addJob() each; events/s achieved`, [run], await stopAll(children), events));
    return rows;
  } finally {
    await stopAll(children);
    await utils.release();
    await pgPool.end();
  }
}

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
    await part("small", async () => {
      log(`ours, ${n(DRAIN)} pending`);
      const small = await oursDatabase(ctx);
      try {
        const scenario = `${n(DRAIN)} pending, all due at once; all drained`;
        for (const workers of [1, 4]) rows.push(await oursDrain(ctx, small, workers, scenario, (r) => seedBacklog(small, DRAIN, `s${workers}_${r}`)));
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
      rows.push(await oursOpenLoop(ctx));
    });
    await part("gw", async () => {
      log("graphile-worker");
      rows.push(...(await graphileWorker(ctx)));
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

  console.log(
    `\n## webhook delivery (receiver, senders and database share the machine; events/s = median of ${REPEAT} runs, all runs listed; ` +
      `${Math.round((performance.now() - started) / 1000)} s; load average ${loadAtStart} at the start, ${load()} at the end)\n`,
  );
  console.table(rows);
  if (costs.length > 0) {
    console.log("\nthe two hot statements on their own (Postgres; claim 50 → record 50, one call at a time):");
    console.table(costs);
  }
  printGoals(rows);
  if (failed.length > 0) {
    console.log(`FAILED: ${failed.join(", ")} (see the log above)`);
    process.exitCode = 1;
  }
}

const OURS = { postgres: "ours (linkgate)", pglite: "ours (linkgate), PGlite" } as const;

/** One line per backend: the ratios of issue 11 against its goals. */
function printGoals(rows: Row[]): void {
  const find = (system: string, workers: number, scenario: string) => rows.find((r) => r.system === system && r.workers === workers && r.scenario.includes(scenario));
  const ratio = (a?: Row, b?: Row) => (a && b ? a["events/s"] / b["events/s"] : NaN);
  const verdict = (x: number, goal: number, atLeast = true, unit = "") =>
    `${Number.isNaN(x) ? "n/a" : x.toFixed(2) + unit} (goal ${atLeast ? "≥" : "≤"} ${goal}${unit}: ${Number.isNaN(x) ? "not run" : (atLeast ? x >= goal : x <= goal) ? "met" : "MISSED"})`;
  const bare = find("ceiling: bare loop, no db", 1, "POSTs");
  console.log(`goals (ratios of events/s; "drain" = the ${n(DRAIN)}-pending drain, "bare loop" = the ceiling with 1 process):`);
  for (const backend of ["postgres", "pglite"] as const) {
    const ours = OURS[backend];
    const drain = (w: number) => find(ours, w, "all drained");
    const open = find(ours, 1, "open loop");
    const parts = [`drain/bare loop, 1 worker ${verdict(ratio(drain(1), bare), 0.75)}`];
    if (backend === "postgres") {
      for (const w of [1, 4]) parts.push(`drain/graphile-worker, ${w} worker${w > 1 ? "s" : ""} ${verdict(ratio(drain(w), find("graphile-worker 0.17", w, "all drained")), 1.1)}`);
      for (const w of [1, 4]) parts.push(`${short(BIG)}/${short(DRAIN)} pending, ${w} worker${w > 1 ? "s" : ""} ${verdict(ratio(find(ours, w, "timed"), drain(w)), 0.9)}`);
    } else {
      parts.push("drain/graphile-worker n/a (graphile-worker needs Postgres)");
      parts.push(`${short(BIG_PGLITE)}/${short(DRAIN)} pending, 1 worker ${verdict(ratio(find(ours, 1, "timed"), drain(1)), 0.9)}`);
    }
    parts.push(`p99 commit → receipt at ${OPEN_RATE}/s ${verdict(open ? open["p99 ms"] : NaN, 20, false, " ms")}`);
    console.log(`  ${backend}: ${parts.join("; ")}`);
  }
}

const childMode = process.argv.find((a) => a.startsWith("--child="))?.slice("--child=".length);
if (childMode) {
  await childMain(childMode);
} else if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  await main(process.argv.slice(2));
}
