// Operators run linkgate on servers, databases and roles configured their own way
// (`ALTER DATABASE … SET`, `ALTER ROLE … SET`). Settings that linkgate's SQL and its driver depend
// on are linkgate's own on every connection it opens (src/db/client.ts, REQUIRED_SETTINGS): on a
// database whose defaults differed, delivery times read as NaN, concurrent workers failed with
// serialization errors, and the raw SQL wrote into another schema's table of the same name.
// What no setting of a connection can change, the database's encoding and whether it takes
// writes, is checked at start and by /readyz.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../src/db/client.ts";
import { applyMigrations } from "../src/db/migrations.ts";
import { claimDue } from "../src/delivery/sql.ts";
import { harnessOn } from "./support/app.ts";
import { adminQuery, openTestDatabase, serverUrl, withDatabase, type TestDatabase } from "./support/db.ts";
import { enqueueEvents, newMasterKey, seedWebhook } from "./support/receiver.ts";
import { MAIN, migratedDataDir, MIGRATE, WORKER } from "./support/server-entry.ts";

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

/** A command run on `url` as an operator starts it; its exit code and output. */
function run(entry: string, url: string) {
  const child = spawn(process.execPath, [entry], {
    env: { PATH: process.env.PATH ?? "", PORT: "0", LINKGATE_DATA_DIR: migratedDataDir("linkgate-settings-"), DATABASE_URL: url },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c) => (stdout += c));
  child.stderr.on("data", (c) => (stderr += c));
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
}

const commands = [
  { name: "npm start", entry: MAIN },
  { name: "npm run worker", entry: WORKER },
  { name: "npm run db:migrate", entry: MIGRATE },
];

describe.skipIf(!serverUrl)("a Postgres database that is not UTF8", () => {
  const name = `lg_test_${randomBytes(6).toString("hex")}`;
  beforeAll(() => adminQuery(`CREATE DATABASE ${name} TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C'`));
  afterAll(() => adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));

  // the first start failed halfway through the migrations, with one recorded as failed
  it.each(commands)("$name refuses it on one line, exit 1, before any migration", async ({ entry }) => {
    const url = withDatabase(serverUrl!, name);
    const r = await run(entry, url);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/^linkgate: cannot use the database at postgres:\/\/\S+: it is encoded LATIN1; linkgate needs a UTF8 database [^\n]*\n$/);
    const client = new (await import("pg")).default.Client({ connectionString: url });
    await client.connect();
    try {
      expect((await client.query(`SELECT 1 FROM pg_tables WHERE tablename = '_prisma_migrations'`)).rows).toEqual([]);
    } finally {
      await client.end();
    }
  });
});

describe.skipIf(!serverUrl)("a read-only Postgres database", () => {
  // an unreachable database's check already said one line; a read-only one crashed the start at
  // its first write, with a stack trace, and /readyz said ready while every sign-in failed
  it.each(commands)("$name refuses it on one line, exit 1", async ({ entry }) => {
    const db = await openTestDatabase("postgres");
    try {
      await db.prisma.$executeRawUnsafe(`ALTER DATABASE "${databaseName(db)}" SET default_transaction_read_only TO on`);
      const r = await run(entry, db.url!);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/^linkgate: cannot use the database at postgres:\/\/\S+: it is read-only \([^\n]*\n$/);
    } finally {
      await db.close();
    }
  });

  it("/readyz says so once a running gateway's database stops taking writes", async () => {
    const db = await openTestDatabase("postgres");
    const h = await harnessOn(db);
    try {
      expect((await h.call("GET", "/readyz")).body.status).toBe("ready");
      await adminQuery(`ALTER DATABASE "${databaseName(db)}" SET default_transaction_read_only TO on`);
      // the gateway's connections start again, as after a failover to a standby
      await adminQuery(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${databaseName(db)}' AND pid <> pg_backend_pid()`);
      await expect.poll(async () => (await h.call("GET", "/readyz")).body.status).toBe("database read-only");
      const ready = await h.call("GET", "/readyz");
      expect(ready.status).toBe(503);
      expect(ready.headers.get("retry-after")).toMatch(/^\d+$/);
    } finally {
      await adminQuery(`ALTER DATABASE "${databaseName(db)}" RESET default_transaction_read_only`);
      await h.close();
    }
  });
});
