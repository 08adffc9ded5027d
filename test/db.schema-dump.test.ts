import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { dumpSchema, schemaSqlFile } from "../scripts/dump-schema.ts";
import { openTestDatabase, serverUrl } from "./support/db.ts";

// prisma/schema.sql is the schema a newcomer reads (tables, functions, triggers in one file);
// it must be what this build's migrations and repeatable .sql files actually produce. Checked
// on Postgres when the run has one (the production backend), on PGlite otherwise.
const backend = serverUrl ? "postgres" : "pglite";

describe(`prisma/schema.sql (on ${backend})`, () => {
  it("is what the migrations and the repeatable .sql files produce", async () => {
    const db = await openTestDatabase(backend);
    try {
      const committed = await readFile(schemaSqlFile, "utf8");
      expect(await dumpSchema(db), "prisma/schema.sql is stale: run npm run db:dump-schema and commit it").toBe(committed);
    } finally {
      await db.close();
    }
  });

  it("changes with the database: an index, a trigger and a function added show up in the dump", async () => {
    // Guards the guard: a dump that missed a kind of object would never go stale.
    const db = await openTestDatabase(backend);
    try {
      await db.prisma.$executeRawUnsafe("CREATE INDEX deliveries_extra_idx ON deliveries (leased_by)");
      await db.prisma.$executeRawUnsafe("CREATE FUNCTION extra_noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$");
      await db.prisma.$executeRawUnsafe("CREATE TRIGGER deliveries_extra AFTER UPDATE ON deliveries FOR EACH ROW EXECUTE FUNCTION extra_noop()");
      const dump = await dumpSchema(db);
      expect(dump).toContain("CREATE INDEX deliveries_extra_idx ON public.deliveries USING btree (leased_by);");
      expect(dump).toContain("CREATE OR REPLACE FUNCTION public.extra_noop()");
      expect(dump).toContain("CREATE TRIGGER deliveries_extra AFTER UPDATE ON public.deliveries FOR EACH ROW EXECUTE FUNCTION public.extra_noop();");
    } finally {
      await db.close();
    }
  });
});
