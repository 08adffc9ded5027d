// The tables' times are `timestamp` without a time zone, read as UTC. A Postgres server takes
// its default time zone from the machine initdb ran on; on one that is not UTC, every time the
// SQL wrote (now(), to_timestamp()) was off by the offset, and the delivery log rebuilt
// signatures with a `webhook-timestamp` that was never sent (30th review). Every connection the
// app opens works in UTC, whatever the server's or the database's own setting.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../src/db/client.ts";
import { claimDue, recordResults } from "../src/delivery/sql.ts";
import { newId } from "../src/ids.ts";
import { openTestDatabase, serverUrl, type TestDatabase } from "./support/db.ts";
import { enqueueEvents, newMasterKey, seedWebhook } from "./support/receiver.ts";

describe.skipIf(!serverUrl)("times on a Postgres database whose time zone is not UTC", () => {
  let base: TestDatabase;
  beforeAll(async () => {
    base = await openTestDatabase("postgres");
    const name = new URL(base.url!).pathname.slice(1);
    // what a server initdb'd on a machine in New York has for every database
    await base.prisma.$executeRawUnsafe(`ALTER DATABASE "${name}" SET timezone TO 'America/New_York'`);
  });
  afterAll(() => base?.close());

  // the URL as configured, and one with connection options of its own (which replace the app's)
  const urls = { plain: () => base.url!, "with options": () => `${base.url!}?options=${encodeURIComponent("-c statement_timeout=0")}` };

  it.each(Object.keys(urls) as Array<keyof typeof urls>)("an event's, a delivery's and an attempt's times are when they happened (URL %s)", async (which) => {
    const db = await openDatabase({ databaseUrl: urls[which](), dataDir: "" });
    try {
      const [{ tz }] = await db.prisma.$queryRaw<{ tz: string }[]>`SELECT current_setting('TimeZone') AS tz`;
      expect(tz).toBe("UTC");

      const hook = await seedWebhook(db, newMasterKey(), { url: "http://127.0.0.1:9/hook" });
      const before = Date.now();
      const [eventId] = await enqueueEvents(db, hook.projectId, 1);
      const event = await db.prisma.outboxEvent.findUniqueOrThrow({ where: { id: eventId } });
      expect(Math.abs(event.createdAt.getTime() - before)).toBeLessThan(60_000);

      const [claimed] = await claimDue(db, { workerId: "w1", limit: 10, leaseMs: 30_000, perWebhookCap: 10 });
      expect(claimed.eventCreatedMs).toBe(event.createdAt.getTime());
      const startedAt = new Date(Math.floor(Date.now() / 1000) * 1000);
      const attemptId = newId("att");
      await recordResults(db, "w1", [
        { deliveryId: claimed.deliveryId, attemptId, attempt: 1, status: "pending", delayMs: 60_000, statusCode: 500, error: "HTTP 500", startedAt, durationMs: 5, responseExcerpt: "", signedWith: [] },
      ]);
      // the attempt's start is the signature's timestamp the delivery log shows
      const attempt = await db.prisma.deliveryAttempt.findUniqueOrThrow({ where: { id: attemptId } });
      expect(attempt.startedAt.getTime()).toBe(startedAt.getTime());
      const delivery = await db.prisma.delivery.findUniqueOrThrow({ where: { id: claimed.deliveryId } });
      expect(Math.abs(delivery.nextAttemptAt.getTime() - (before + 60_000))).toBeLessThan(60_000);
    } finally {
      await db.close();
    }
  });
});
