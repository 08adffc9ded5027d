// How a commit reaches a worker: a NOTIFY while no worker is busy claiming, none while one has
// promised to claim again (src/delivery/busy.ts), since notifying commits take turns
// (docs/operations.md, "Waking the workers"). Every test's worker polls once a minute, so only
// a NOTIFY or its own promise can deliver within the test.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { promiseBusy, withdrawBusy } from "../src/delivery/busy.ts";
import { DELIVERY_CHANNEL } from "../src/webhooks/outbox.ts";
import { backends } from "./support/db.ts";
import { deliveryWorld } from "./support/delivery-world.ts";
import { enqueueEvents, eventually, newMasterKey, seedWebhook, TestReceiver } from "./support/receiver.ts";

const CONFIG = { retryScheduleMs: [1_000], webhookTimeoutMs: 2_000, webhookAllowPrivate: true };
const NO_POLL = 60_000;
/**
 * The busy workers' idle window here. The rule under test is "withdraw once claims have found
 * nothing for the window". A commit is found only by a claim that starts after it, so the window
 * must cover the gap between two commits (30 ms plus the commit) and a claim; in a full suite run
 * on a loaded 2-core machine that passed the product's 100 ms (16 of the 20 commits notified).
 * 500 ms covers it; with 15 ms, about the rule this one replaced (three empty claims), 18 of 20
 * notified here.
 */
const IDLE_WINDOW_MS = 500;

describe.each(backends)("waking the delivery workers on %s", (backend) => {
  const world = deliveryWorld(backend);
  let receiver: TestReceiver;
  const masterKey = newMasterKey();

  beforeAll(async () => {
    receiver = await TestReceiver.start();
  });
  afterAll(async () => {
    await receiver?.close();
  });

  const worker = () => world.worker({ masterKey, config: CONFIG, pollMs: NO_POLL, idleAfterMs: IDLE_WINDOW_MS, maintenanceIntervalMs: 0 });
  const promises = () => world.db.prisma.deliveryBusyWorker.findMany();
  const received = (n: number, what: string) => eventually(async () => receiver.receipts.length >= n, 10_000, what);

  /** Notifications on the delivery channel, counted up to a barrier of our own. */
  async function listening() {
    const payloads: string[] = [];
    const stop = await world.db.listen(DELIVERY_CHANNEL, (p) => payloads.push(p));
    let barriers = 0;
    return {
      stop,
      /** Commit-time NOTIFYs of the outbox so far: everything committed before this call has arrived. */
      async count(): Promise<number> {
        const barrier = `barrier-${++barriers}`;
        await world.db.prisma.$executeRaw`SELECT pg_notify(${DELIVERY_CHANNEL}, ${barrier})`;
        await eventually(async () => payloads.includes(barrier), 5_000, "the barrier notification");
        return payloads.filter((p) => p === "").length;
      },
    };
  }

  it("a commit notifies unless a worker's promise to claim again holds", async () => {
    const { projectId } = await seedWebhook(world.db, masterKey, { url: receiver.url });
    const l = await listening();
    try {
      await enqueueEvents(world.db, projectId);
      expect(await l.count()).toBe(1);
      await promiseBusy(world.db, "w-test", 60_000);
      await enqueueEvents(world.db, projectId);
      expect(await l.count()).toBe(1);
      await withdrawBusy(world.db, "w-test");
      await enqueueEvents(world.db, projectId);
      expect(await l.count()).toBe(2);
      // a promise that ran out (its worker stopped without withdrawing it) stops nothing
      await promiseBusy(world.db, "w-gone", 1);
      await new Promise((r) => setTimeout(r, 20));
      await enqueueEvents(world.db, projectId);
      expect(await l.count()).toBe(3);
      // and once it is a minute old, the next promise made removes it
      await world.db.prisma.deliveryBusyWorker.update({ where: { workerId: "w-gone" }, data: { until: new Date(Date.now() - 61_000) } });
      await promiseBusy(world.db, "w-next", 1);
      expect((await promises()).map((p) => p.workerId)).toEqual(["w-next"]);
    } finally {
      await l.stop();
      await world.db.prisma.deliveryBusyWorker.deleteMany();
      await world.db.prisma.delivery.deleteMany({ where: { projectId } });
    }
  });

  it("an idle worker is woken by the commit itself, again after a burst", async () => {
    const { projectId } = await seedWebhook(world.db, masterKey, { url: receiver.url });
    const before = receiver.receipts.length;
    worker();
    await enqueueEvents(world.db, projectId);
    await received(before + 1, "the first delivery");
    await enqueueEvents(world.db, projectId, 40, { perTx: 2 });
    await received(before + 41, "the burst");
    // the burst over, the worker goes back to waiting for a NOTIFY and withdraws any promise
    await eventually(async () => (await promises()).length === 0, 5_000, "the promise withdrawn");
    await new Promise((r) => setTimeout(r, 100));
    await enqueueEvents(world.db, projectId);
    await received(before + 42, "the delivery after the burst");
  });

  // 31st review: the worker's pool replaced its dead connections quietly, no query failed, and
  // the LISTEN was never set up again: every event waited for the poll
  it.runIf(backend === "postgres")("a worker whose LISTEN connection the server ended listens again and is woken by the next commit", async () => {
    const { projectId } = await seedWebhook(world.db, masterKey, { url: receiver.url });
    const before = receiver.receipts.length;
    worker();
    await enqueueEvents(world.db, projectId);
    await received(before + 1, "the first delivery");
    await eventually(async () => (await promises()).length === 0, 5_000, "the promise withdrawn");
    const listeners = async () =>
      (await world.db.prisma.$queryRawUnsafe<{ pid: number }[]>(
        `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()`,
      )).map((r) => r.pid);
    const ended = await listeners();
    expect(ended.length).toBeGreaterThan(0);
    await world.db.prisma.$executeRawUnsafe(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = ANY ($1::int[])`, ended);
    await eventually(async () => (await listeners()).some((pid) => !ended.includes(pid)), 5_000, "a new LISTEN");
    await enqueueEvents(world.db, projectId);
    await received(before + 2, "the delivery after the LISTEN came back");
  });

  /**
   * A worker kept busy by 400 deliveries from 80 commits, enough back to back that consecutive
   * claims find deliveries, and a count of notifications from before the burst; resolves once
   * the burst is committed and the worker has promised.
   */
  async function busyWorker() {
    const { projectId } = await seedWebhook(world.db, masterKey, { url: receiver.url });
    const before = receiver.receipts.length;
    const w = worker();
    const l = await listening();
    try {
      const burst = Array.from({ length: 4 }, () => enqueueEvents(world.db, projectId, 100, { perTx: 5 }));
      await eventually(async () => (await promises()).some((p) => p.workerId === w.id), 10_000, "the worker's promise");
      await Promise.all(burst);
    } catch (err) {
      await l.stop();
      throw err;
    }
    return { projectId, before, w, l };
  }

  it.runIf(backend === "postgres")("a busy worker keeps its promise through gaps between commits shorter than its idle window", async () => {
    const { projectId, before, l } = await busyWorker();
    try {
      const notified = await l.count();
      // Then one commit every 30 ms: several empty claims between two commits (the worker claims
      // every 5 ms while promised), as a pause of the commits under load leaves them.
      for (let i = 0; i < 20; i++) {
        await enqueueEvents(world.db, projectId);
        await new Promise((r) => setTimeout(r, 30));
      }
      await received(before + 420, "all 420 deliveries");
      // Withdrawn at the first gap, every one of the 20 commits would notify.
      expect((await l.count()) - notified).toBeLessThan(10);
    } finally {
      await l.stop();
    }
  });

  it.runIf(backend === "postgres")("a busy worker promises, finds every delivery without a NOTIFY, and withdraws when it stops", async () => {
    const { before, w, l } = await busyWorker();
    try {
      await received(before + 400, "all 400 deliveries");
      // 80 commits: only those before the promise, or after a withdrawal, notified
      expect(await l.count()).toBeLessThan(80);
    } finally {
      await l.stop();
    }
    await w.stop();
    expect((await promises()).map((p) => p.workerId)).not.toContain(w.id);
  });
});
