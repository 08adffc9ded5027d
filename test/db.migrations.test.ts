import { describe, expect, it } from "vitest";
import { readFile } from "node:fs/promises";
import { openDatabase } from "../src/db/client.ts";
import { applyMigrations, pendingSchemaChanges } from "../src/db/migrations.ts";
import { backends, openTestDatabase } from "./support/db.ts";

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
