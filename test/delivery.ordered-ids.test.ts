// Events, deliveries and attempts are written at the event rate, so their ids start with the time
// they were made (src/ids.ts, src/webhooks/outbox.sql; docs/operations.md, "Ids of the outbox
// and the delivery log"): a new row's key lands at the right-hand end of its index.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newOrderedId } from "../src/ids.ts";
import { startWorker } from "../src/delivery/worker.ts";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";
import { closedPortUrl, enqueueEvents, eventually, newMasterKey, seedWebhook } from "./support/receiver.ts";

const CONFIG = { retryScheduleMs: [1_000], webhookTimeoutMs: 2_000, webhookAllowPrivate: true };

/** The milliseconds an ordered id carries: its 12 hex digits after the prefix. */
const timeOf = (id: string) => parseInt(id.split("_")[1].slice(0, 12), 16);
const sortedAsText = (ids: string[]) => [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("ordered ids made in Node", () => {
  it("are the prefix, 12 hex digits of milliseconds and 80 random bits, and sort by time as text", () => {
    const id = newOrderedId("att", 0x18c_0000_0001);
    expect(id).toMatch(/^att_018c00000001[A-Za-z0-9_-]{14}$/);
    const times = [1, 0xff, 0x100, 1_764_000_000_000, 1_764_000_000_001, 0xffff_ffff_ffff];
    const ids = times.map((t) => newOrderedId("evt", t));
    expect(sortedAsText([...ids].reverse())).toEqual(ids);
    expect(ids.map(timeOf)).toEqual(times);
    // the random part differs within one millisecond
    expect(new Set(Array.from({ length: 1_000 }, () => newOrderedId("dlv", 5))).size).toBe(1_000);
  });
});

describe.each(backends)("ids of events, deliveries and attempts on %s", (backend) => {
  let db: TestDatabase;
  const masterKey = newMasterKey();

  beforeAll(async () => {
    db = await openTestDatabase(backend);
  });
  afterAll(() => db?.close());

  it("start with the time they were made, so later rows sort after earlier ones", async () => {
    // nobody listens there: each first attempt is logged as a failure, which is all this needs
    const { projectId } = await seedWebhook(db, masterKey, { url: await closedPortUrl() });
    const start = Date.now();
    for (let i = 0; i < 3; i++) {
      await enqueueEvents(db, projectId);
      await pause(5);
    }
    const end = Date.now();
    const deliveries = await db.prisma.delivery.findMany({ where: { projectId }, orderBy: { createdAt: "asc" }, select: { id: true, eventId: true } });
    expect(deliveries).toHaveLength(3);
    for (const [ids, shape] of [
      [deliveries.map((d) => d.eventId), /^evt_[0-9a-f]{12}[A-Za-z0-9_-]{14}$/],
      [deliveries.map((d) => d.id), /^dlv_[0-9a-f]{32}$/],
    ] as const) {
      for (const id of ids) expect(id).toMatch(shape);
      expect(sortedAsText(ids)).toEqual(ids);
      // made by this machine's clock (the database's, for deliveries) during the test
      for (const t of ids.map(timeOf)) {
        expect(t).toBeGreaterThanOrEqual(start - 1_000);
        expect(t).toBeLessThanOrEqual(end + 1_000);
      }
    }

    const worker = startWorker({ db, masterKey, config: CONFIG, pollMs: 50, maintenanceIntervalMs: 0 });
    try {
      await eventually(async () => (await db.prisma.deliveryAttempt.count({ where: { delivery: { projectId } } })) >= 3, 10_000, "three attempts");
    } finally {
      await worker.stop();
    }
    const attempts = await db.prisma.deliveryAttempt.findMany({ where: { delivery: { projectId } }, orderBy: { startedAt: "asc" }, select: { id: true, startedAt: true } });
    for (const a of attempts) {
      expect(a.id).toMatch(/^att_[0-9a-f]{12}[A-Za-z0-9_-]{14}$/);
      expect(Math.abs(timeOf(a.id) - a.startedAt.getTime())).toBeLessThan(1_000);
    }
  });
});
