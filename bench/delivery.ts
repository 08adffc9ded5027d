// Delivery engine benchmark: `npm run bench -- delivery`, or `npx tsx bench/delivery.ts`.
//
// * drain: 1 or 4 workers running (on Postgres: separate worker processes, as deployed; on
//   PGlite: one worker in this process, the only way to share an embedded database), then
//   10,000 deliveries appear at once (10 webhooks, one fast loopback receiver): events/s until
//   all are recorded, and p50/p99 of commit → receipt (mostly queueing, for a backlog).
// * steady: events enqueued with enqueue() at a fixed rate while 1 worker runs: p50/p99 of
//   commit → receipt (what a receiver experiences when the queue is not backed up).
// * ceilings: the same 10,000 POSTs from a bare loop over the sender (no database), and the
//   same claim/record statements with no HTTP, to show where the time goes.
import { parseArgs } from "node:util";
import os from "node:os";
import { spawn } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseMasterKey } from "../src/crypto.ts";
import { openDatabase, type Database } from "../src/db/client.ts";
import { createSender } from "../src/delivery/sender.ts";
import { claimDue, recordResults } from "../src/delivery/sql.ts";
import { startWorker, type DeliveryWorker } from "../src/delivery/worker.ts";
import { generateWebhookSecret } from "../src/webhooks/secrets.ts";
import type { Backend, TestDatabase } from "../test/support/db.ts";
import { bulkEnqueue, enqueueEvents, newMasterKey, seedWebhook, TestReceiver } from "../test/support/receiver.ts";

const CONFIG = { retryScheduleMs: [1_000, 2_000, 3_000, 4_000, 5_000], webhookTimeoutMs: 5_000, webhookAllowPrivate: true };
const masterKey = newMasterKey();
// Imported in main(): test/support/db.ts reads TEST_DATABASE_URL when it loads.
let support: typeof import("../test/support/db.ts");

type Row = Record<string, string | number>;

const pct = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
const ms = (n: number) => Math.round(n * 10) / 10;

async function fresh(backend: Backend, receiver: TestReceiver, webhooks: number) {
  const db = await support.openTestDatabase(backend);
  const hooks = [];
  for (let i = 0; i < webhooks; i++) hooks.push(await seedWebhook(db, masterKey, { url: receiver.url }));
  return { db, hooks };
}

async function waitAllRecorded(db: Database, total: number, timeoutMs = 120_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while ((await db.prisma.delivery.count({ where: { status: "succeeded" } })) < total) {
    if (Date.now() > end) throw new Error("benchmark timed out");
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function drain(backend: Backend, workers: number, pending: number): Promise<Row> {
  const receiver = await TestReceiver.start({ status: 200 });
  const { db, hooks } = await fresh(backend, receiver, 10);
  const stop: (() => Promise<void>)[] = [];
  if (backend === "postgres") {
    for (let i = 0; i < workers; i++) stop.push(await spawnWorker((db as TestDatabase).url!));
  } else {
    const w = startWorker({ db, config: CONFIG, masterKey, maintenanceIntervalMs: 0 });
    stop.push(() => w.stop());
  }
  await new Promise((r) => setTimeout(r, 300));
  const committedAt = new Map<string, number>();
  const t0 = performance.now();
  for (const h of hooks) {
    const ids = await bulkEnqueue(db, h.projectId, pending / hooks.length);
    const t = Date.now();
    for (const id of ids) committedAt.set(id, t);
  }
  await waitAllRecorded(db, pending);
  const seconds = (performance.now() - t0) / 1000;
  await Promise.all(stop.map((s) => s()));
  const lat = receiver.receipts.map((r) => r.at - committedAt.get(String(r.headers["x-service-event-id"]))!).sort((a, b) => a - b);
  const dup = receiver.receipts.length - new Set(receiver.receipts.map((r) => r.headers["x-service-event-id"])).size;
  await receiver.close();
  await db.close();
  const how = backend === "postgres" ? `${workers} process${workers > 1 ? "es" : ""}` : "in-process";
  return { scenario: `drain ${pending} appearing at once`, backend, workers: how, "events/s": Math.round(pending / seconds), "p50 ms": ms(pct(lat, 0.5)), "p99 ms": ms(pct(lat, 0.99)), duplicates: dup };
}

/** A worker in its own process (this file with --worker); resolves once it runs; returns its graceful stop. */
async function spawnWorker(databaseUrl: string): Promise<() => Promise<void>> {
  const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), "--worker"], {
    env: { ...process.env, BENCH_DATABASE_URL: databaseUrl, BENCH_MASTER_KEY: masterKey.raw.toString("base64") },
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => d.toString().includes("ready") && resolve());
    child.on("exit", (code) => reject(new Error(`bench worker exited with ${code}`)));
  });
  return () =>
    new Promise<void>((resolve) => {
      child.removeAllListeners("exit");
      child.on("exit", () => resolve());
      child.kill("SIGTERM");
    });
}

async function workerMain(): Promise<void> {
  const db = await openDatabase({ databaseUrl: process.env.BENCH_DATABASE_URL!, dataDir: "", poolSize: 4 });
  const w = startWorker({ db, config: CONFIG, masterKey: parseMasterKey(process.env.BENCH_MASTER_KEY!), maintenanceIntervalMs: 0 });
  process.on("SIGTERM", async () => {
    await w.stop();
    await db.close();
    process.exit(0);
  });
  console.log("ready");
}

async function steady(backend: Backend, rate: number, seconds: number): Promise<Row> {
  const receiver = await TestReceiver.start({ status: 200 });
  const { db, hooks } = await fresh(backend, receiver, 1);
  const w = startWorker({ db, config: CONFIG, masterKey, maintenanceIntervalMs: 0 });
  await new Promise((r) => setTimeout(r, 300));
  const committedAt = new Map<string, number>();
  const total = rate * seconds;
  const start = Date.now();
  let next = 0;
  // Open loop: event i is due at start + i/rate; 8 producers keep up with the schedule.
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < total) {
        const i = next++;
        const wait = start + (i * 1000) / rate - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const [id] = await enqueueEvents(db, hooks[0].projectId, 1);
        committedAt.set(id, Date.now());
      }
    }),
  );
  const achieved = total / ((Date.now() - start) / 1000);
  await waitAllRecorded(db, total);
  await w.stop();
  const lat = receiver.receipts.map((r) => r.at - committedAt.get(String(r.headers["x-service-event-id"]))!).sort((a, b) => a - b);
  await receiver.close();
  await db.close();
  return { scenario: `steady: ${rate}/s offered via enqueue(), ${Math.round(achieved)}/s achieved`, backend, workers: "in-process", "events/s": Math.round(achieved), "p50 ms": ms(pct(lat, 0.5)), "p99 ms": ms(pct(lat, 0.99)), duplicates: 0 };
}

/** The HTTP side alone: the same sender, 50 sends in flight, no database. */
async function bareHttp(count: number): Promise<Row> {
  const receiver = await TestReceiver.start({ status: 200 });
  const sender = createSender({ timeoutMs: 5_000, allowPrivate: true });
  const secrets = { current: generateWebhookSecret() };
  const body = JSON.stringify({ id: "evt_bench", event_type: "user.created", created_at: new Date().toISOString(), project_id: "prj_bench", data: {} });
  const lat: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (next < count) {
        next++;
        const r = await sender.send({ url: receiver.url, body, eventId: "evt_bench", eventType: "user.created", attempt: 1, secrets });
        if (r.statusCode !== 200) throw new Error(r.error ?? "send failed");
        lat.push(r.durationMs);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  await sender.close();
  await receiver.close();
  lat.sort((a, b) => a - b);
  return { scenario: `ceiling: bare send loop, ${count} POSTs`, backend: "-", workers: "-", "events/s": Math.round(count / seconds), "p50 ms": ms(pct(lat, 0.5)), "p99 ms": ms(pct(lat, 0.99)), duplicates: 0 };
}

/** The database side alone: claim 50, record 50 as succeeded, repeat. */
async function bareSql(backend: Backend, pending: number): Promise<Row> {
  const receiver = await TestReceiver.start({ status: 200 });
  const { db, hooks } = await fresh(backend, receiver, 10);
  for (const h of hooks) await bulkEnqueue(db, h.projectId, pending / hooks.length);
  const t0 = performance.now();
  let done = 0;
  for (;;) {
    const batch = await claimDue(db, { workerId: "bench", limit: 50, leaseMs: 30_000, perWebhookCap: 1_000 });
    if (batch.length === 0) break;
    await recordResults(
      db,
      "bench",
      batch.map((c) => ({ deliveryId: c.deliveryId, attempt: c.attempt, status: "succeeded" as const, delayMs: null, statusCode: 200, error: null, startedAt: new Date(), durationMs: 1, responseExcerpt: "ok", requestHeaders: {} })),
    );
    done += batch.length;
  }
  const seconds = (performance.now() - t0) / 1000;
  await receiver.close();
  await db.close();
  return { scenario: `ceiling: claim+record only, ${pending} pending`, backend, workers: "-", "events/s": Math.round(done / seconds), "p50 ms": "-", "p99 ms": "-", duplicates: 0 };
}

export async function main(argv: string[] = []): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { pending: { type: "string", default: "10000" }, quick: { type: "boolean", default: false } }, allowPositionals: true, strict: false });
  const pending = Number(values.pending);
  support = await import("../test/support/db.ts");
  const backends = support.backends;
  console.log(`\n## webhook delivery (${os.cpus().length} CPUs; receiver, workers and the database share them)\n`);
  const rows: Row[] = [];
  rows.push(await bareHttp(pending));
  for (const backend of backends) {
    rows.push(await bareSql(backend, pending));
    for (const workers of backend === "postgres" ? [1, 4] : [1]) rows.push(await drain(backend, workers, pending));
    // PGlite runs in this thread with one connection: 200 enqueue() transactions a second alone saturate it.
    if (!values.quick) rows.push(await steady(backend, backend === "postgres" ? 200 : 50, 5));
  }
  console.table(rows);
}

if (process.argv.includes("--worker")) {
  await workerMain();
} else if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  process.env.TEST_DATABASE_URL ||= process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
  await main(process.argv.slice(2));
}
