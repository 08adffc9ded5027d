// The delivery worker's lifecycle: running → stopping → stopped, or → abandoning → stopped, in
// whatever order stop() and abandon() arrive (src/delivery/lifecycle.ts); the transitions on
// their own, then what each state means for deliveries, with real receivers and databases.
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { Lifecycle } from "../src/delivery/lifecycle.ts";
import type { DeliveryWorker } from "../src/delivery/worker.ts";
import { backends } from "./support/db.ts";
import { deliveryWorld } from "./support/delivery-world.ts";
import { enqueueEvents, eventually, newMasterKey, seedWebhook } from "./support/receiver.ts";
import { lockWaiters } from "./support/locks.ts";

describe("lifecycle transitions", () => {
  function lifecycle() {
    const calls = { shutdowns: 0, aborts: 0 };
    let finish!: () => void;
    const l = new Lifecycle({
      shutdown: () => {
        calls.shutdowns++;
        return new Promise<void>((resolve) => (finish = resolve));
      },
      abandonSends: () => void calls.aborts++,
    });
    return { l, calls, finish: () => finish() };
  }

  it("stop(): running → stopping → stopped, one shutdown however often it is called", async () => {
    const { l, calls, finish } = lifecycle();
    expect([l.state, l.running]).toEqual(["running", true]);
    const first = l.stop();
    expect([l.state, l.running]).toEqual(["stopping", false]);
    expect(l.stop()).toBe(first);
    finish();
    await first;
    expect(l.state).toBe("stopped");
    expect(l.stop()).toBe(first);
    expect(calls).toEqual({ shutdowns: 1, aborts: 0 });
  });

  it("abandon() while stopping aborts the sends once and joins the shutdown under way", async () => {
    const { l, calls, finish } = lifecycle();
    const stopping = l.stop();
    const abandoning = l.abandon();
    expect(l.state).toBe("abandoning");
    expect(abandoning).toBe(stopping);
    expect(l.abandon()).toBe(stopping);
    expect(l.stop()).toBe(stopping);
    finish();
    await stopping;
    expect(l.state).toBe("stopped");
    expect(calls).toEqual({ shutdowns: 1, aborts: 1 });
  });

  it("abandon() while running goes straight to abandoning; after stopped it changes nothing", async () => {
    const { l, calls, finish } = lifecycle();
    const abandoning = l.abandon();
    expect(l.state).toBe("abandoning");
    finish();
    await abandoning;
    expect(l.abandon()).toBe(abandoning);
    expect(l.state).toBe("stopped");
    expect(calls).toEqual({ shutdowns: 1, aborts: 1 });
  });

  it("a pause under way ends when the worker leaves running; none starts afterwards", async () => {
    const { l, finish } = lifecycle();
    const pause = l.sleep(10 * 60_000);
    void l.stop();
    // Both resolve long before ten minutes (the test's own timeout would end it first).
    await pause;
    await l.sleep(10 * 60_000);
    finish();
  });
});

const CONFIG = { retryScheduleMs: [50, 100], webhookTimeoutMs: 30_000, webhookAllowPrivate: true };

describe.each(backends)("delivery worker lifecycle on %s", (backend) => {
  const world = deliveryWorld(backend, {
    // Deliveries handed back stay due: the next test's worker would claim them.
    afterTest: async (db) => {
      await db.prisma.delivery.deleteMany();
      await db.prisma.outboxEvent.deleteMany();
    },
  });
  const masterKey = newMasterKey();

  function worker(): DeliveryWorker {
    return world.worker({ masterKey, logger: world.logger, config: CONFIG, pollMs: 200, maintenanceIntervalMs: 0 });
  }
  const silentReceiver = () => world.receiver({ delayMs: 10 * 60_000 });
  const deliveryOf = (eventId: string, webhookId: string) =>
    world.db.prisma.delivery.findUniqueOrThrow({ where: { eventId_webhookId: { eventId, webhookId } }, include: { attemptLog: true } });

  it("abandon() while stop() waits for a silent receiver: the send is handed back unrecorded, then stopped", async () => {
    const r = await silentReceiver();
    const hook = await seedWebhook(world.db, masterKey, { url: r.url });
    const w = worker();
    const [eventId] = await enqueueEvents(world.db, hook.projectId, 1);
    await r.waitFor(1);

    const stopping = w.stop();
    expect(w.state).toBe("stopping");
    const abandoning = w.abandon();
    expect(w.state).toBe("abandoning");
    await Promise.all([stopping, abandoning]);
    expect(w.state).toBe("stopped");

    const d = await deliveryOf(eventId, hook.webhookId);
    expect(d).toMatchObject({ status: "pending", attempts: 0, leasedBy: null, leaseUntil: null });
    expect(d.attemptLog).toEqual([]);
    expect(w.stats).toMatchObject({ claimed: 1, recorded: 0, inFlight: 0, unrecorded: 0, queued: 0 });

    // Once stopped, abandon() changes nothing.
    await w.abandon();
    expect(w.state).toBe("stopped");
    expect(await deliveryOf(eventId, hook.webhookId)).toMatchObject({ status: "pending", attempts: 0, leasedBy: null });
  });

  it("abandon() while running stops at once and hands the send in flight back", async () => {
    const r = await silentReceiver();
    const hook = await seedWebhook(world.db, masterKey, { url: r.url });
    const w = worker();
    const [eventId] = await enqueueEvents(world.db, hook.projectId, 1);
    await r.waitFor(1);
    const abandoning = w.abandon();
    expect(w.state).toBe("abandoning");
    await abandoning;
    expect(w.state).toBe("stopped");
    expect(await deliveryOf(eventId, hook.webhookId)).toMatchObject({ status: "pending", attempts: 0, leasedBy: null, attemptLog: [] });
  });

  it.runIf(backend === "postgres")("stop() while a result is being recorded waits for that record, then stops", async () => {
    // The record statement is held up by a row lock another connection keeps on the delivery.
    const gate = world.closeAfterTest(await gatedReceiver());
    const hook = await seedWebhook(world.db, masterKey, { url: gate.url });
    const w = worker();
    const [eventId] = await enqueueEvents(world.db, hook.projectId, 1);
    await gate.arrived;
    const { id: deliveryId } = await deliveryOf(eventId, hook.webhookId);

    const locker = new pg.Client({ connectionString: world.db.url });
    await locker.connect();
    let stopping: Promise<unknown> = Promise.resolve();
    try {
      await locker.query("BEGIN");
      await locker.query("SELECT 1 FROM deliveries WHERE id = $1 FOR UPDATE", [deliveryId]);
      gate.answer(200);
      await eventually(async () => (await recordWaitingOnLock(locker)) && w.stats.unrecorded === 1, 10_000, "the record to wait on the lock");

      let stopped = false;
      stopping = w.stop().then(() => (stopped = true));
      expect(w.state).toBe("stopping");
      expect(await recordWaitingOnLock(locker)).toBe(true);
      expect(stopped).toBe(false);
      await locker.query("COMMIT");
    } finally {
      await locker.end(); // a lock left behind would hold up the record, and the stop, for ever
    }
    await stopping;
    expect(w.state).toBe("stopped");
    const d = await deliveryOf(eventId, hook.webhookId);
    expect(d).toMatchObject({ status: "succeeded", attempts: 1, lastStatus: 200, leasedBy: null, leaseUntil: null });
    expect(d.attemptLog).toHaveLength(1);
    expect(w.stats).toMatchObject({ recorded: 1, succeeded: 1, lostLeases: 0, unrecorded: 0 });
  });
});

/** Whether a statement of this database waits on a lock (the worker's record, behind `locker`). */
async function recordWaitingOnLock(locker: pg.Client): Promise<boolean> {
  return (await lockWaiters(locker)) > 0;
}

/** A receiver that holds its first request until answer() is called. */
async function gatedReceiver(): Promise<{ url: string; arrived: Promise<void>; answer(status: number): void; close(): Promise<void> }> {
  let pending: ServerResponse | null = null;
  let status: number | null = null;
  let arrive!: () => void;
  const arrived = new Promise<void>((resolve) => (arrive = resolve));
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (status !== null) res.writeHead(status).end("ok");
      else {
        pending = res;
        arrive();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    arrived,
    answer(s) {
      status = s;
      pending?.writeHead(s).end("ok");
    },
    close: () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}
