import { describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import pg from "pg";
import { openDatabase, type Database } from "../src/db/client.ts";
import { applyMigrations, applyOrdinaryMigrations, pendingSchemaChanges, readMigrations } from "../src/db/migrations.ts";
import { applyRepeatable, checksum, readRepeatable, REPEATABLE, REPEATABLE_LOCK, splitStatements, type RepeatableFile } from "../src/db/repeatable.ts";
import { adminQuery, backends, openTestDatabase, serverUrl, withDatabase, type Backend } from "./support/db.ts";

describe("migrations", () => {
  it("prisma/schema.prisma and prisma/migrations describe the same database", async () => {
    const db = await openDatabase({ dataDir: "memory://" });
    try {
      const sql = await pendingSchemaChanges(db.adapterFactory);
      expect(sql, `schema.prisma changed without a migration; run npm run db:new-migration -- <name>:\n${sql}`).toBe("");
    } finally {
      await db.close();
    }
  });

  it("the drift check notices a model the migrations lack", async () => {
    // Guards the guard: if diffing silently returned nothing, the test above would pass forever.
    const schema = await readFile(new URL("../prisma/schema.prisma", import.meta.url), "utf8");
    const db = await openDatabase({ dataDir: "memory://" });
    try {
      const sql = await pendingSchemaChanges(db.adapterFactory, `${schema}\nmodel Extra {\n  id String @id\n}\n`);
      expect(sql).toContain('CREATE TABLE "Extra"');
    } finally {
      await db.close();
    }
  });

  describe.each(backends)("on %s", (backend) => {
    it("applies once and then finds nothing to apply", async () => {
      const db = await openTestDatabase(backend);
      try {
        expect(await applyMigrations(db.adapterFactory)).toEqual([]);
        const rows = await db.prisma.$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM _prisma_migrations`;
        expect(Number(rows[0].n)).toBeGreaterThan(0);
      } finally {
        await db.close();
      }
    });
  });
});

// The functions and triggers live in repeatable files (src/db/repeatable.ts), applied after the
// ordinary migrations whenever a file's content changes.
describe("repeatable migrations", () => {
  /** A database with no migrations at all (the test databases are copies of a migrated one). */
  async function emptyDatabase(backend: Backend): Promise<Database & { url?: string }> {
    if (backend === "pglite") return openDatabase({ dataDir: "memory://" });
    const name = `lg_test_${randomBytes(6).toString("hex")}`;
    await adminQuery(`CREATE DATABASE ${name}`);
    const url = withDatabase(serverUrl!, name);
    const db = await openDatabase({ databaseUrl: url, dataDir: "" });
    return {
      ...db,
      url,
      async close() {
        await db.close();
        await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      },
    };
  }

  type Fn = { name: string; header: string; body: string };
  async function catalog(db: Database) {
    const functions = await db.prisma.$queryRaw<Fn[]>`
      SELECT n.nspname || '.' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' AS name,
             split_part(pg_get_functiondef(p.oid), 'AS $function$', 1) AS header, btrim(p.prosrc, E' \n') AS body
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname IN ('public', 'console') ORDER BY 1`;
    const triggers = await db.prisma.$queryRaw<{ def: string }[]>`
      SELECT pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE NOT tgisinternal ORDER BY tgname`;
    return { functions: new Map(functions.map((f) => [f.name, f])), triggers: triggers.map((t) => t.def) };
  }

  const edit = (files: RepeatableFile[], name: string, from: string, to: string) =>
    files.map((f) => (f.name === name ? { ...f, sql: f.sql.replace(from, to) } : f));
  const known = async () => (await readMigrations()).migrationDirectories.map((d) => d.path);
  const outboxBody = async (db: Database) =>
    (await db.prisma.$queryRaw<{ src: string }[]>`SELECT prosrc AS src FROM pg_proc WHERE proname = 'outbox_enqueue'`)[0].src;
  const recorded = async (db: Database) =>
    db.prisma.$queryRaw<{ name: string; checksum: string }[]>`SELECT name, checksum FROM _linkgate_repeatable ORDER BY name`;

  it("splits a file at the semicolons that end statements only", () => {
    const sql = `-- a comment; not a statement
      CREATE FUNCTION f() RETURNS text LANGUAGE plpgsql AS $body$ BEGIN RETURN 'a;b'; END $body$;
      SELECT 'it''s; one', E'\\'; still', "odd;name" FROM t /* x; /* nested; */ y; */;
      SELECT $$;$$ -- trailing; comment
      ;
      -- only a comment; at the end`;
    expect(splitStatements(sql).map((s) => s.replace(/\s+/g, " "))).toEqual([
      "-- a comment; not a statement CREATE FUNCTION f() RETURNS text LANGUAGE plpgsql AS $body$ BEGIN RETURN 'a;b'; END $body$",
      `SELECT 'it''s; one', E'\\'; still', "odd;name" FROM t /* x; /* nested; */ y; */`,
      "SELECT $$;$$ -- trailing; comment",
    ]);
  });

  describe.each(backends)("on %s", (backend) => {
    it("leave every function and trigger the history defined as it defined it, and add link_verify's jsonb form", async () => {
      const db = await emptyDatabase(backend);
      try {
        await applyOrdinaryMigrations(db.adapterFactory);
        const history = await catalog(db);
        expect(await applyRepeatable(db.adapterFactory, { knownMigrations: await known() })).toEqual([...REPEATABLE]);
        const now = await catalog(db);
        expect(now.triggers).toEqual(history.triggers);
        const positional = [...history.functions.keys()].find((k) => k.startsWith("public.link_verify("))!;
        for (const [name, fn] of history.functions) {
          if (name === positional) continue;
          expect(now.functions.get(name), name).toEqual(fn);
        }
        // the positional form is now a wrapper of the jsonb form (the previous build calls it)
        expect(now.functions.get(positional)!.header).toBe(history.functions.get(positional)!.header.replace("LANGUAGE plpgsql", "LANGUAGE sql"));
        expect([...now.functions.keys()].filter((k) => !history.functions.has(k))).toEqual(["public.link_text_array(a jsonb)", "public.link_verify(p jsonb)"]);
      } finally {
        await db.close();
      }
    });

    it("apply nothing on an unchanged start, an edited file once, and a failing set not at all", async () => {
      const db = await openTestDatabase(backend);
      try {
        const files = await readRepeatable();
        const knownMigrations = await known();
        const before = await recorded(db);
        expect(before.map((r) => r.name).sort()).toEqual([...REPEATABLE].sort());
        expect(await applyMigrations(db.adapterFactory)).toEqual([]);

        const edited = edit(files, "webhooks/outbox.sql", "PERFORM pg_notify(p_channel, '');", "PERFORM pg_notify(p_channel, 'edited');");
        expect(await applyRepeatable(db.adapterFactory, { files: edited, knownMigrations })).toEqual(["webhooks/outbox.sql"]);
        expect(await outboxBody(db)).toContain("'edited'");
        expect(await applyRepeatable(db.adapterFactory, { files: edited, knownMigrations })).toEqual([]);
        const after = await recorded(db);
        expect(after.find((r) => r.name === "webhooks/outbox.sql")!.checksum).toBe(checksum(edited[0].sql));
        expect(after.filter((r) => r.name !== "webhooks/outbox.sql")).toEqual(before.filter((r) => r.name !== "webhooks/outbox.sql"));

        // one transaction: a file that fails takes the edit of the file before it back too
        const broken = edit(
          edit(files, "webhooks/outbox.sql", "PERFORM pg_notify(p_channel, '');", "PERFORM pg_notify(p_channel, 'again');"),
          "linking/link-verify.sql",
          "CREATE OR REPLACE FUNCTION link_text_array",
          "CREATE OR REPLACE FUNCTION link_text_array(no_such_type) RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\nCREATE OR REPLACE FUNCTION link_text_array",
        );
        await expect(applyRepeatable(db.adapterFactory, { files: broken, knownMigrations })).rejects.toThrow(/linking\/link-verify\.sql/);
        expect(await outboxBody(db)).toContain("'edited'");
        expect(await recorded(db)).toEqual(after);

        // an older build (it lacks a migration the database has) leaves the newer definitions alone
        expect(await applyRepeatable(db.adapterFactory, { files, knownMigrations: knownMigrations.slice(0, -1) })).toEqual([]);
        expect(await outboxBody(db)).toContain("'edited'");

        // this build's files again: back to what they say
        expect(await applyMigrations(db.adapterFactory)).toEqual(["webhooks/outbox.sql"]);
        expect(await outboxBody(db)).not.toContain("'edited'");
      } finally {
        await db.close();
      }
    });
  });

  it.skipIf(!serverUrl)("two processes starting at once on Postgres both succeed, and the files are applied once", async () => {
    const db = await openTestDatabase("postgres");
    const other = await openDatabase({ databaseUrl: db.url!, dataDir: "" });
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      const files = edit(await readRepeatable(), "webhooks/outbox.sql", "PERFORM pg_notify(p_channel, '');", "PERFORM pg_notify(p_channel, 'both');");
      const knownMigrations = await known();
      // Both get past the checksum read and queue on the lock, so the second decides under it.
      await holder.query("SELECT pg_advisory_lock($1)", [REPEATABLE_LOCK]);
      const runs = [db, other].map((d) => applyRepeatable(d.adapterFactory, { files, knownMigrations }));
      const waiting = async () =>
        (await holder.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid::bigint = $1 AND NOT granted", [REPEATABLE_LOCK])).rows[0].n;
      while ((await waiting()) < 2) await new Promise((r) => setImmediate(r));
      await holder.query("SELECT pg_advisory_unlock($1)", [REPEATABLE_LOCK]);
      const results = await Promise.all(runs);
      expect(results.map((r) => r.join()).sort()).toEqual(["", "webhooks/outbox.sql"]);
      expect(await outboxBody(db)).toContain("'both'");
    } finally {
      await holder.end();
      await other.close();
      await db.close();
    }
  });
});
