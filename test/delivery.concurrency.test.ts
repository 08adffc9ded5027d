// Several workers, each with its own connection pool, sharing one Postgres queue: every event
// arrives, and none arrives twice. (PGlite is one process's private database: nothing to share.)
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase, type Database } from "../src/db/client.ts";
import { startWorker, type DeliveryWorker } from "../src/delivery/worker.ts";
import { backends, openTestDatabase, TEST_CONNECT_TIMEOUT_MS, type TestDatabase } from "./support/db.ts";
import { bulkEnqueue, enqueueEvents, eventually, newMasterKey, seedWebhook, TestReceiver } from "./support/receiver.ts";

const CONFIG = { retryScheduleMs: [50, 100, 150, 200, 250], webhookTimeoutMs: 2_000, webhookAllowPrivate: true };
const EVENTS = 5_000;
// "Nothing twice" is about leases: no two workers may claim one delivery. A send that times out
// is resent by design (at least once), so these runs give sends a timeout no loaded machine
// reaches; with 2 s, a test process starved of CPU made the receiver answer late and counted
// those legitimate resends as double claims.
const NO_TIMEOUTS = { ...CONFIG, webhookTimeoutMs: 30_000 };

const WEBHOOKS = 4;

describe.runIf(backends.includes("postgres"))("delivery workers sharing Postgres", () => {
  let db: TestDatabase;
  const masterKey = newMasterKey();

  beforeAll(async () => {
    db = await openTestDatabase("postgres");
  });
  afterAll(async () => {
    await db?.close();
  });

  it("survives its connections being killed mid-run", async () => {
    const receiver = await TestReceiver.start({ status: 200, delayMs: 5 });
    const conn = await openDatabase({ databaseUrl: db.url, dataDir: "", poolSize: 4, connectTimeoutMs: TEST_CONNECT_TIMEOUT_MS });
    const errors: string[] = [];
    const logger = { debug() {}, info() {}, warn() {}, error: (_: object, msg?: string) => errors.push(msg ?? "") };
    const w = startWorker({ db: conn, config: CONFIG, masterKey, concurrency: 16, batchSize: 16, pollMs: 100, maintenanceIntervalMs: 0, logger });
    try {
      const hook = await seedWebhook(db, masterKey, { url: receiver.url });
      await bulkEnqueue(db, hook.projectId, 1_000);
      // Kill every other connection to this database a few times while it works.
      for (let i = 0; i < 4; i++) {
        await new Promise((r) => setTimeout(r, 150));
        await db.prisma.$executeRaw`
          SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid()`;
      }
      await eventually(async () => (await db.prisma.delivery.count({ where: { webhookId: hook.webhookId, status: "succeeded" } })) === 1_000, 30_000, "all delivered");
      const ids = new Set(receiver.receipts.map((r) => r.headers["x-service-event-id"]));
      expect(ids.size).toBe(1_000);
      // Attempts are logged once each, even when recording had to be retried.
      expect(await db.prisma.deliveryAttempt.count({ where: { delivery: { webhookId: hook.webhookId } } })).toBe(receiver.receipts.length);
      console.log(`killed connections: ${w.stats.dbErrors} failed queries retried (${[...new Set(errors)].join("; ")}); ${receiver.receipts.length - 1_000} resent`);
    } finally {
      await w.stop();
      await conn.close();
      await receiver.close();
      await db.prisma.delivery.deleteMany();
      await db.prisma.outboxEvent.deleteMany();
    }
  });

  for (const n of [2, 4]) {
    it(`${n} workers deliver ${EVENTS} events: nothing lost, nothing twice`, async () => {
      const receiver = await TestReceiver.start({ status: 200 });
      const connections: Database[] = [];
      const workers: DeliveryWorker[] = [];
      const spawn = async () => {
        const conn = await openDatabase({ databaseUrl: db.url, dataDir: "", poolSize: 4, connectTimeoutMs: TEST_CONNECT_TIMEOUT_MS });
        connections.push(conn);
        const w = startWorker({ db: conn, config: NO_TIMEOUTS, masterKey, concurrency: 32, batchSize: 32, pollMs: 250, maintenanceIntervalMs: 0 });
        workers.push(w);
        return w;
      };
      try {
        const hooks = [];
        for (let i = 0; i < WEBHOOKS; i++) hooks.push(await seedWebhook(db, masterKey, { url: receiver.url }));
        for (let i = 0; i < n; i++) await spawn();

        // Arriving while the workers run: most in bulk (enqueue() costs ~2 ms an event through
        // Prisma, which would make this test about enqueueing), some through enqueue() itself.
        const t0 = Date.now();
        const ids: string[] = [];
        for (let round = 0; round < 10; round++) {
          for (const h of hooks) ids.push(...(await bulkEnqueue(db, h.projectId, (EVENTS - 200) / 10 / WEBHOOKS)));
        }
        for (const h of hooks) ids.push(...(await enqueueEvents(db, h.projectId, 200 / WEBHOOKS, { perTx: 10 })));
        const enqueuedMs = Date.now() - t0;

        // Halfway, one worker stops gracefully and a fresh one takes its place.
        await receiver.waitFor(EVENTS / 2, 30_000);
        await workers[0].stop();
        await spawn();

        await receiver.waitFor(EVENTS, 30_000);
        await eventually(async () => (await db.prisma.delivery.count({ where: { status: "succeeded" } })) === EVENTS, 15_000, "all recorded");
        const totalMs = Date.now() - t0;
        await new Promise((r) => setTimeout(r, 300)); // anything sent twice would arrive by now

        const counts = new Map<string, number>();
        for (const r of receiver.receipts) {
          const id = String(r.headers["x-service-event-id"]);
          counts.set(id, (counts.get(id) ?? 0) + 1);
        }
        const lost = ids.filter((id) => !counts.has(id));
        const twice = [...counts].filter(([, c]) => c > 1);
        expect(lost).toEqual([]);
        expect(twice).toEqual([]);
        expect(receiver.receipts).toHaveLength(EVENTS);
        expect(await db.prisma.delivery.count({ where: { OR: [{ status: { not: "succeeded" } }, { attempts: { not: 1 } }, { leasedBy: { not: null } }] } })).toBe(0);
        expect(await db.prisma.deliveryAttempt.count()).toBe(EVENTS);
        // The database shows a record as soon as it commits, a worker counts it a moment later.
        await eventually(async () => workers.reduce((n, w) => n + w.stats.recorded, 0) >= EVENTS, 5_000, "the workers' counts of their records");
        const perWorker = workers.map((w) => w.stats.succeeded);
        expect(perWorker.reduce((a, b) => a + b, 0)).toBe(EVENTS);
        expect(workers.every((w) => w.stats.dbErrors === 0 && w.stats.lostLeases === 0)).toBe(true);
        console.log(`${n} workers: enqueued in ${enqueuedMs} ms, all delivered and recorded in ${totalMs} ms; per worker ${perWorker.join("/")}`);
      } finally {
        await Promise.all(workers.map((w) => w.stop()));
        await Promise.all(connections.map((c) => c.close()));
        await receiver.close();
        await db.prisma.delivery.deleteMany();
        await db.prisma.outboxEvent.deleteMany();
      }
    });
  }
});
