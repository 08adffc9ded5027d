// The envelope's created_at (docs/events.md, "The envelope"): when the event was written, UTC ISO
// 8601 with nine fractional digits. Events of one change are written in order ("What emits
// what"), and a change after another writes after it: a receiver that orders what it got by
// created_at (deliveries come in any order, docs/webhooks.md) must read them in that order.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newId } from "../src/ids.ts";
import { enqueue, enqueueAll, type OutboxEventInput } from "../src/webhooks/outbox.ts";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";

const NINE_DIGITS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z$/;

describe.each(backends)("the envelope's created_at on %s", (backend) => {
  let db: TestDatabase;
  const projectId = newId("prj");

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    await db.prisma.project.create({ data: { id: projectId, name: `times ${projectId}` } });
  });
  afterAll(() => db?.close());

  const createdAts = async () => {
    const rows = await db.prisma.outboxEvent.findMany({ where: { projectId }, orderBy: { seq: "asc" }, select: { body: true } });
    return rows.map((r) => JSON.parse(r.body).created_at as string);
  };

  it("rises with every event written, within one change and from one change to the next", async () => {
    const before = new Date().toISOString();
    // one change that writes many events (an unmerge writes one per identifier and passkey it removes)
    const inputs: OutboxEventInput[] = Array.from({ length: 2_000 }, (_, i) => ({ projectId, eventType: "user.updated", data: { user: { user_id: `acc_${i}` } } }));
    await db.prisma.$transaction((tx) => enqueueAll(tx, inputs));
    // then changes one after another
    for (let i = 0; i < 200; i++) await db.prisma.$transaction((tx) => enqueue(tx, { projectId, eventType: "user.updated", data: { user: { user_id: `acc_s${i}` } } }));
    const after = new Date(Date.now() + 1).toISOString();
    const times = await createdAts();
    expect(times).toHaveLength(2_200);
    const backwards = times.flatMap((t, i) => (i > 0 && t <= times[i - 1] ? [`${times[i - 1]} then ${t}`] : []));
    expect(backwards, "events whose created_at is not after the one written before them").toEqual([]);
    for (const t of times) {
      expect(t).toMatch(NINE_DIGITS);
      // within the test, to the millisecond: the digits after the milliseconds only refine them
      expect(t.slice(0, 23) >= before.slice(0, 23) && t.slice(0, 23) <= after.slice(0, 23), t).toBe(true);
    }
  });
});
