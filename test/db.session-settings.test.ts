// Operators run linkgate on servers, databases and roles configured their own way
// (`ALTER DATABASE … SET`, `ALTER ROLE … SET`). Settings that linkgate's SQL and its driver depend
// on are linkgate's own on every connection it opens (src/db/client.ts, REQUIRED_SETTINGS): on a
// database whose defaults differed, delivery times read as NaN, concurrent workers failed with
// serialization errors, and the raw SQL wrote into another schema's table of the same name.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../src/db/client.ts";
import { applyMigrations } from "../src/db/migrations.ts";
import { claimDue } from "../src/delivery/sql.ts";
import { openTestDatabase, serverUrl, type TestDatabase } from "./support/db.ts";
import { enqueueEvents, newMasterKey, seedWebhook } from "./support/receiver.ts";

const databaseName = (db: TestDatabase) => new URL(db.url!).pathname.slice(1);

describe.skipIf(!serverUrl)("a Postgres database whose defaults are not Postgres's", () => {
  let base: TestDatabase;
  beforeAll(async () => {
    base = await openTestDatabase("postgres");
    const name = databaseName(base);
    // a schema first in the path, holding a table named like one of linkgate's
    await base.prisma.$executeRawUnsafe(`CREATE SCHEMA other`);
    await base.prisma.$executeRawUnsafe(`CREATE TABLE other.deliveries (LIKE public.deliveries INCLUDING ALL)`);
    for (const setting of [
      `DateStyle TO 'German'`,
      `IntervalStyle TO 'iso_8601'`,
      `extra_float_digits TO -15`,
      `default_transaction_isolation TO 'serializable'`,
      `search_path TO other, public`,
    ]) {
      await base.prisma.$executeRawUnsafe(`ALTER DATABASE "${name}" SET ${setting}`);
    }
  });
  afterAll(() => base?.close());

  // the URL as configured, and one with connection options of its own
  const urls = { plain: () => base.url!, "with options": () => `${base.url!}?options=${encodeURIComponent("-c statement_timeout=0")}` };

  it.each(Object.keys(urls) as Array<keyof typeof urls>)("linkgate's connections work as on a default database (URL %s)", async (which) => {
    const db = await openDatabase({ databaseUrl: urls[which](), dataDir: "" });
    try {
      const [isolation] = await db.prisma.$transaction((tx) => tx.$queryRaw<{ level: string }[]>`SELECT current_setting('transaction_isolation') AS level`);
      expect(isolation.level).toBe("read committed");

      const hook = await seedWebhook(db, newMasterKey(), { url: "http://127.0.0.1:9/hook" });
      const [eventId] = await enqueueEvents(db, hook.projectId, 1);
      const event = await db.prisma.outboxEvent.findUniqueOrThrow({ where: { id: eventId } });
      const [claimed] = await claimDue(db, { workerId: "w1", limit: 10, leaseMs: 30_000, perWebhookCap: 10 });
      // the fast path reads times as text (DateStyle) and as float8 milliseconds (extra_float_digits)
      expect(claimed.eventCreatedMs).toBe(event.createdAt.getTime());
      // the raw SQL and Prisma see the same table
      const delivery = await db.prisma.delivery.findUniqueOrThrow({ where: { id: claimed.deliveryId } });
      expect(delivery.leasedBy).toBe("w1");
      expect(delivery.leaseUntil!.getTime() - Date.now()).toBeGreaterThan(20_000);
      expect(await base.prisma.$queryRawUnsafe<unknown[]>(`SELECT 1 FROM other.deliveries`)).toEqual([]);
    } finally {
      await db.close();
    }
  });
});

describe.skipIf(!serverUrl)("a Postgres role with a schema of its own name", () => {
  let base: TestDatabase;
  beforeAll(async () => {
    base = await openTestDatabase("postgres", { empty: true });
    // "$user" is the first entry of the default search_path: such a schema takes every
    // unqualified CREATE TABLE of the migrations
    await base.prisma.$executeRawUnsafe(`CREATE SCHEMA AUTHORIZATION CURRENT_USER`);
  });
  afterAll(() => base?.close());

  it("migrations put the tables in public, where the app reads them", async () => {
    const db = await openDatabase({ databaseUrl: base.url!, dataDir: "" });
    try {
      await applyMigrations(db.adapterFactory);
      const [{ elsewhere }] = await db.prisma.$queryRaw<{ elsewhere: number }[]>`
        SELECT count(*)::int AS elsewhere FROM information_schema.tables WHERE table_schema = current_user`;
      expect(elsewhere).toBe(0);
      expect(await db.prisma.project.count()).toBe(0);
    } finally {
      await db.close();
    }
  });
});
