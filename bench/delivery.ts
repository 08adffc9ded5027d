// Delivery engine benchmark: `npm run bench -- delivery`, or `npx tsx bench/delivery.ts`.
//
// * drain: 10,000 pending deliveries (10 webhooks, one fast loopback receiver), then 1 or 4
//   workers (4 = separate instances with separate pools, on Postgres) until all are recorded:
//   events/s, and p50/p99 of enqueue-commit → receipt for that backlog.
// * steady: events enqueued with enqueue() at a fixed rate while 1 worker runs: p50/p99 of
//   commit → receipt (what a receiver experiences when the queue is not backed up).
// * ceilings: the same 10,000 POSTs from a bare loop over the sender (no database), and the
//   same claim/record statements with no HTTP, to show where the time goes.
import { parseArgs } from "node:util";
import os from "node:os";
import { pathToFileURL } from "node:url";
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
  const committedAt = new Map<string, number>();
  for (const h of hooks) {
    const ids = await bulkEnqueue(db, h.projectId, pending / hooks.length);
    const t = Date.now();
    for (const id of ids) committedAt.set(id, t);
  }
  const conns: Database[] = [];
  const ws: DeliveryWorker[] = [];
  const t0 = performance.now();
  for (let i = 0; i < workers; i++) {
    // On Postgres each worker gets its own pool, like separate processes; PGlite has one connection.
    const conn = backend === "postgres" ? await openDatabase({ databaseUrl: (db as TestDatabase).url, dataDir: "", poolSize: 4 }) : db;
    if (conn !== db) conns.push(conn);
    ws.push(startWorker({ db: conn, config: CONFIG, masterKey, maintenanceIntervalMs: 0 }));
  }
  await waitAllRecorded(db, pending);
  const seconds = (performance.now() - t0) / 1000;
  await Promise.all(ws.map((w) => w.stop()));
  await Promise.all(conns.map((c) => c.close()));
  const lat = receiver.receipts.map((r) => r.at - committedAt.get(String(r.headers["x-service-event-id"]))!).sort((a, b) => a - b);
  const dup = receiver.receipts.length - new Set(receiver.receipts.map((r) => r.headers["x-service-event-id"])).size;
  await receiver.close();
  await db.close();
  return { scenario: `drain ${pending} pending`, backend, workers, "events/s": Math.round(pending / seconds), "p50 ms": ms(pct(lat, 0.5)), "p99 ms": ms(pct(lat, 0.99)), duplicates: dup };
}

async function steady(backend: Backend, rate: number, seconds: number): Promise<Row> {
  const receiver = await TestReceiver.start({ status: 200 });
  const { db, hooks } = await fresh(backend, receiver, 1);
  const w = startWorker({ db, config: CONFIG, masterKey, maintenanceIntervalMs: 0 });
  await new Promise((r) => setTimeout(r, 200));
  const committedAt = new Map<string, number>();
  const total = rate * seconds;
  const start = Date.now();
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor(((Date.now() - start) / 1000) * rate));
    while (sent < due) {
      const [id] = await enqueueEvents(db, hooks[0].projectId, 1);
      committedAt.set(id, Date.now());
      sent++;
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  const achieved = total / ((Date.now() - start) / 1000);
  await waitAllRecorded(db, total);
  await w.stop();
  const lat = receiver.receipts.map((r) => r.at - committedAt.get(String(r.headers["x-service-event-id"]))!).sort((a, b) => a - b);
  await receiver.close();
  await db.close();
  return { scenario: `steady ${rate}/s offered (${Math.round(achieved)}/s enqueued)`, backend, workers: 1, "events/s": Math.round(achieved), "p50 ms": ms(pct(lat, 0.5)), "p99 ms": ms(pct(lat, 0.99)), duplicates: 0 };
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
  return { scenario: `ceiling: bare send loop, ${count} POSTs`, backend: "-", workers: 1, "events/s": Math.round(count / seconds), "p50 ms": ms(pct(lat, 0.5)), "p99 ms": ms(pct(lat, 0.99)), duplicates: 0 };
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
  return { scenario: `ceiling: claim+record only, ${pending} pending`, backend, workers: 1, "events/s": Math.round(done / seconds), "p50 ms": "-", "p99 ms": "-", duplicates: 0 };
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
    if (!values.quick) rows.push(await steady(backend, 200, 5));
  }
  console.table(rows);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  process.env.TEST_DATABASE_URL ||= process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
  await main(process.argv.slice(2));
}
