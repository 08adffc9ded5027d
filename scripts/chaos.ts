// Chaos run for the delivery engine: `npx tsx scripts/chaos.ts [--events 20000] [--workers 3]`.
//
// Starts a throw-away Postgres cluster (initdb + pg_ctl on a free port, as the `postgres` OS
// user when run as root, since initdb refuses root), applies the migrations, and runs delivery
// workers as child processes against it while 20,000 events arrive. Meanwhile it SIGKILLs a
// random running worker every 1–3 s (and starts a replacement), until a minute after the last
// event arrived, and restarts Postgres once, abruptly (`pg_ctl restart -m immediate`: crash
// recovery), mid-run. The receiver answers 2 % of requests with 500 to keep retries in play.
//
// At the end every event committed to the outbox must have been answered 2xx at least once:
// anything still pending once the backlog has stopped shrinking for a minute is "lost" and the
// exit code is 1; so is a dashboard whose numbers drifted from
// the delivery log (every logged attempt counted once, every finished delivery once). Duplicates (events answered 2xx more than
// once, expected after a SIGKILL: at-least-once) are counted and printed.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { parseMasterKey } from "../src/crypto.ts";
import { openDatabase, type Database } from "../src/db/client.ts";
import { applyMigrations } from "../src/db/migrations.ts";
import { applyStaged } from "../src/delivery/sql.ts";
import { startWorker } from "../src/delivery/worker.ts";
import { bulkEnqueue, newMasterKey, seedWebhook, TestReceiver } from "../test/support/receiver.ts";

const CONFIG = { retryScheduleMs: [100, 200, 400, 800, 1_600], webhookTimeoutMs: 2_000, webhookAllowPrivate: true };
const LEASE_MS = 3_000;
/** How long workers go on being killed after the last event is enqueued (if the backlog lasts that long). */
const CHAOS_AFTER_PRODUCING_MS = 60_000;
/** A backlog that has not shrunk for this long is stuck: what is still pending then is lost. */
const STALLED_MS = 60_000;

if (process.argv.includes("--worker")) await workerMain();
else process.exit(await main());

// ---- a worker process --------------------------------------------------------------------------

async function workerMain(): Promise<void> {
  const db = await openDatabase({ databaseUrl: process.env.CHAOS_DATABASE_URL!, dataDir: "", poolSize: 4 });
  const tag = `[worker ${process.pid}]`;
  let errors = 0;
  const w = startWorker({
    db,
    config: CONFIG,
    masterKey: parseMasterKey(process.env.CHAOS_MASTER_KEY!),
    leaseMs: LEASE_MS,
    concurrency: 32,
    batchSize: 32,
    pollMs: 250,
    maintenanceIntervalMs: 0,
    logger: {
      debug() {},
      info() {},
      warn() {},
      error: (obj, msg) => {
        if (errors++ < 5) console.error(tag, msg, (obj as { err?: { message?: string } }).err?.message ?? "");
      },
    },
  });
  // started: the chaos may now kill it mid-work (below, "ready")
  process.send?.("ready");
  process.on("SIGTERM", async () => {
    await w.stop();
    await db.close();
    process.exit(0);
  });
  setInterval(() => {}, 1 << 30); // stay alive until killed
}

// ---- the conductor -----------------------------------------------------------------------------

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      events: { type: "string", default: "20000" },
      workers: { type: "string", default: "3" },
      keep: { type: "boolean", default: false },
    },
  });
  const total = Number(values.events);
  const workerCount = Number(values.workers);
  const cluster = await startCluster();
  const children = new Set<ChildProcess>();
  const receiver = await TestReceiver.start({ status: 200 });
  let db: Database | null = null;
  const t0 = Date.now();
  const say = (msg: string) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)} s] ${msg}`);
  try {
    say(`Postgres ${cluster.version} at ${cluster.url} (${cluster.dir})`);
    db = await openDatabase({ databaseUrl: cluster.url, dataDir: "", poolSize: 4 });
    await applyMigrations(db.adapterFactory);
    const masterKey = newMasterKey();
    const hooks = [];
    for (let i = 0; i < 4; i++) hooks.push(await seedWebhook(db, masterKey, { url: receiver.url }));

    // 2 % of answers are 500s; the rest 200. Per event: how many 2xx answers.
    const ok = new Map<string, number>();
    receiver.respond((r) => {
      const id = String(r.headers["x-service-event-id"]);
      if (Math.random() < 0.02) return { status: 500 };
      ok.set(id, (ok.get(id) ?? 0) + 1);
      return { status: 200 };
    });

    // Only a worker that has started is killed: one still loading its modules (a few seconds on a
    // loaded machine) did no work to interrupt, and killing those every 1 to 3 s left no worker
    // delivering at a load of 20 (18,585 deliveries still pending after the 3 minutes).
    const ready = new Set<ChildProcess>();
    const spawnWorker = () => {
      const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), "--worker"], {
        env: { ...process.env, CHAOS_DATABASE_URL: cluster.url, CHAOS_MASTER_KEY: masterKey.raw.toString("base64") },
        stdio: ["ignore", "inherit", "inherit", "ipc"],
      });
      children.add(child);
      child.on("message", (m) => m === "ready" && ready.add(child));
      child.on("exit", () => {
        children.delete(child);
        ready.delete(child);
      });
      return child;
    };
    for (let i = 0; i < workerCount; i++) spawnWorker();

    // Events arrive in rounds of 500 (bulk statements, retried through the restart).
    let enqueued = 0;
    const producing = (async () => {
      while (enqueued < total) {
        const n = Math.min(500, total - enqueued);
        const hook = hooks[(enqueued / 500) % hooks.length | 0];
        for (;;) {
          try {
            await bulkEnqueue(db!, hook.projectId, n);
            break;
          } catch {
            await sleep(200); // the server is restarting; an ambiguous failure may have committed: the check below uses the database
          }
        }
        enqueued += n;
        await sleep(150);
      }
      say(`all ${total} events enqueued`);
    })();

    // Kill a random worker every 1–3 s; restart Postgres once, abruptly, at ~40 % of the events.
    let kills = 0;
    let restarted = false;
    let done = false;
    const chaos = (async () => {
      while (!done) {
        await sleep(1_000 + Math.random() * 2_000);
        if (done) break;
        const victims = [...ready];
        const victim = victims[Math.floor(Math.random() * victims.length)];
        if (victim?.pid) {
          victim.kill("SIGKILL");
          kills++;
          spawnWorker();
        }
        if (!restarted && enqueued >= total * 0.4) {
          restarted = true;
          say("restarting Postgres (-m immediate)");
          const r = cluster.ctl(["restart", "-m", "immediate", "-w", "-t", "30"]);
          say(r.status === 0 ? "Postgres is back" : `pg_ctl restart failed: ${r.stderr}`);
        }
      }
    })();

    await producing;
    // The chaos goes on while the backlog drains, for at most CHAOS_AFTER_PRODUCING_MS; then the
    // workers finish alone, and a backlog that stops shrinking for STALLED_MS is what is lost. A
    // fixed deadline for the whole drain instead counted a slow machine's backlog as lost: at a
    // load average of 15, workers restarted every few seconds had delivered 9,351 of 20,000 when
    // the 3 minutes were up.
    const open = db;
    const pendingNow = () => open.prisma.delivery.count({ where: { status: "pending" } }).catch(() => -1); // -1: restarting
    const chaosUntil = Date.now() + CHAOS_AFTER_PRODUCING_MS;
    let pending = await pendingNow();
    while (pending !== 0 && Date.now() < chaosUntil) {
      await sleep(500);
      pending = await pendingNow();
    }
    done = true;
    await chaos;
    say(`chaos over, ${pending} pending`);
    let fewest = pending < 0 ? Infinity : pending;
    let shrunkAt = Date.now();
    while (pending !== 0 && Date.now() - shrunkAt < STALLED_MS) {
      await sleep(500);
      pending = await pendingNow();
      if (pending >= 0 && pending < fewest) [fewest, shrunkAt] = [pending, Date.now()];
    }
    for (const c of children) c.kill("SIGTERM");
    await sleep(1_000);

    const events = await db.prisma.outboxEvent.findMany({ select: { id: true } });
    const dashboard = await dashboardDrift(db);
    const byStatus = await db.prisma.delivery.groupBy({ by: ["status"], _count: true });
    const lost = events.filter((e) => !ok.has(e.id)).map((e) => e.id);
    const duplicates = [...ok.values()].filter((c) => c > 1).length;
    const extraSends = [...ok.values()].reduce((a, c) => a + c - 1, 0);
    say("done");
    console.log({
      eventsCommitted: events.length,
      requests: receiver.receipts.length,
      answered2xx: [...ok.values()].reduce((a, c) => a + c, 0),
      workersKilled: kills,
      postgresRestarted: restarted,
      deliveries: Object.fromEntries(byStatus.map((s) => [s.status, s._count])),
      duplicates: `${duplicates} events delivered more than once (${extraSends} extra 2xx deliveries)`,
      lost: lost.length,
      dashboard,
    });
    if (lost.length > 0) console.log("lost event ids (first 20):", lost.slice(0, 20));
    const drifted = dashboard.attemptsCounted !== dashboard.attemptsLogged || dashboard.finishedCounted !== dashboard.finishedDeliveries;
    if (drifted) console.log("the dashboard's numbers drifted from the delivery log");
    return lost.length === 0 && pending === 0 && !drifted ? 0 : 1;
  } finally {
    for (const c of children) c.kill("SIGKILL");
    await receiver.close();
    await db?.close().catch(() => {});
    cluster.ctl(["stop", "-m", "fast", "-w"]);
    if (!values.keep) rmSync(cluster.dir, { recursive: true, force: true });
  }
}

/**
 * The dashboard's numbers against the delivery log, after the run: every logged attempt counted
 * once in the hourly rollups, every finished delivery once in the per-state counts, through
 * workers killed between a record and the apply of what it staged, and a Postgres crash.
 */
async function dashboardDrift(db: Database) {
  await applyAllStaged(db);
  const [row] = await db.prisma.$queryRaw<{ counted: number; logged: number; finished_counted: number; finished: number }[]>`
    SELECT (SELECT coalesce(sum(succeeded + retried + failed), 0)::int FROM dashboard.webhook_hours) AS counted,
           (SELECT count(*)::int FROM delivery_attempts) AS logged,
           (SELECT coalesce(sum(succeeded + failed + gone), 0)::int FROM dashboard.webhook_delivery_hours) AS finished_counted,
           (SELECT count(*)::int FROM deliveries WHERE status <> 'pending') AS finished`;
  return { attemptsLogged: row.logged, attemptsCounted: row.counted, finishedDeliveries: row.finished, finishedCounted: row.finished_counted };
}

async function applyAllStaged(db: Database): Promise<void> {
  while ((await applyStaged(db, true)) > 0);
}

// ---- a throw-away cluster ----------------------------------------------------------------------

type Cluster = { dir: string; url: string; version: string; ctl(args: string[]): { status: number | null; stderr: string } };

async function startCluster(): Promise<Cluster> {
  const bin = findPgBin();
  const asRoot = process.getuid?.() === 0;
  // initdb refuses to run as root; run the server tools as the `postgres` OS user then.
  const run = (tool: string, args: string[]) => {
    const cmd = asRoot ? ["runuser", ["-u", "postgres", "--", path.join(bin, tool), ...args]] as const : [path.join(bin, tool), args] as const;
    const r = spawnSync(cmd[0], [...cmd[1]], { encoding: "utf8" });
    return { status: r.status, stderr: `${r.stderr ?? ""}${r.error?.message ?? ""}` };
  };
  const dir = mkdtempSync(path.join(tmpdir(), "linkgate-chaos-"));
  chmodSync(dir, 0o700);
  if (asRoot) {
    const uid = Number(spawnSync("id", ["-u", "postgres"], { encoding: "utf8" }).stdout.trim());
    const gid = Number(spawnSync("id", ["-g", "postgres"], { encoding: "utf8" }).stdout.trim());
    if (!Number.isInteger(uid)) throw new Error("running as root needs a `postgres` OS user for initdb");
    chownSync(dir, uid, gid);
  }
  const data = path.join(dir, "data");
  const init = run("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
  const port = await freePort();
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=200`;
  const ctl = (args: string[]) => run("pg_ctl", ["-D", data, "-l", path.join(dir, "server.log"), "-o", opts, ...args]);
  const started = ctl(["start", "-w", "-t", "30"]);
  if (started.status !== 0) throw new Error(`pg_ctl start failed: ${started.stderr}`);
  const version = path.basename(path.dirname(bin));
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  return { dir, url, version, ctl };
}

function findPgBin(): string {
  const base = "/usr/lib/postgresql";
  if (existsSync(base)) {
    const versions = readdirSync(base).sort((a, b) => Number(b) - Number(a));
    for (const v of versions) if (existsSync(path.join(base, v, "bin", "initdb"))) return path.join(base, v, "bin");
  }
  const which = spawnSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" }).stdout.trim();
  if (which) return path.dirname(which);
  throw new Error("initdb not found (install the postgresql server package)");
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
