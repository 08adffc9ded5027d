// A replay (replayFailedWebhookDeliveries, the REST replay, `linkgate deliveries replay`) sends
// again every failed delivery "whose event happened at or after since" (docs/webhooks.md,
// "Redelivery and replay"). It compared the delivery's created_at, its transaction's start,
// with `since`, while the event's createdAt (what the API shows) is when the event was written,
// later in the same transaction: replaying since an event's own createdAt skipped that very
// event whenever its transaction had begun a millisecond or more before it wrote the event.
// The test makes that gap certain: the event is written in a transaction that first waits, on
// the database's clock, until 2 ms have passed since it began.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KeyActor } from "../src/deps.ts";
import { countReplayable, replayFailed } from "../src/delivery/redelivery.ts";
import { newId } from "../src/ids.ts";
import { enqueue } from "../src/webhooks/outbox.ts";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";
import { storedProject, storedWebhook } from "./support/stored-log.ts";

describe.each(backends)("replaying since an event's time, on %s", (backend) => {
  let db: TestDatabase;
  let owner: KeyActor;
  const projectId = newId("prj");
  const webhookId = newId("wh");

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    owner = await storedProject(db, projectId, "replay since");
    await storedWebhook(db, projectId, webhookId, { enabled: true, events: ["user.created"] });
  });
  afterAll(async () => {
    await db?.close();
  });

  it("replays a failed delivery since its event's own createdAt, though its transaction began earlier", async () => {
    const eventId = await db.prisma.$transaction(async (tx) => {
      // no sleep: the database's clock is read until it is 2 ms past the transaction's start
      for (;;) {
        const [{ moved }] = await tx.$queryRaw<{ moved: boolean }[]>`SELECT clock_timestamp() - now() > interval '2 milliseconds' AS moved`;
        if (moved) break;
      }
      return enqueue(tx, { projectId, eventType: "user.created", data: { user_id: "usr_1" } });
    });
    // the receiver was down: every attempt failed
    const failed = await db.prisma.delivery.updateMany({ where: { eventId }, data: { status: "failed", attempts: 6, completedAt: new Date() } });
    expect(failed.count).toBe(1);

    // Event.createdAt, as the API shows it (src/graphql/schema/delivery.ts exposes the column)
    const { createdAt } = await db.prisma.outboxEvent.findUniqueOrThrow({ where: { id: eventId }, select: { createdAt: true } });
    expect(await countReplayable(db, { projectId, webhookId, since: createdAt })).toBe(1);
    expect(await replayFailed(db, owner, webhookId, createdAt)).toBe(1);
    expect(await db.prisma.delivery.findFirstOrThrow({ where: { eventId } })).toMatchObject({ status: "pending", attempts: 0 });

    // an event written before `since` is not: a millisecond later replays nothing
    await db.prisma.delivery.updateMany({ where: { eventId }, data: { status: "failed", attempts: 6, completedAt: new Date() } });
    expect(await replayFailed(db, owner, webhookId, new Date(createdAt.getTime() + 1))).toBe(0);
  });
});
