// An embedded database works in UTC whatever time zone the machine that made it had: PGlite's
// initdb writes that zone into the cluster's postgresql.conf, and `now()` then wrote local times
// into columns every rule reads as UTC (docs/operations.md, "Database connections").
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openDatabase } from "../src/db/client.ts";
import { applyMigrations } from "../src/db/migrations.ts";
import { harnessOn } from "./support/app.ts";

const folders: string[] = [];
afterAll(() => folders.forEach((f) => rmSync(f, { recursive: true, force: true })));

/** A data folder as PGlite's initdb leaves it on a machine whose zone is `zone` (it writes a fixed offset: Etc/GMT-1 for Berlin in winter). */
async function folderMadeIn(zone: string): Promise<string> {
  const dir = mkdtempSync(path.join(tmpdir(), "linkgate-utc-"));
  folders.push(dir);
  const db = await openDatabase({ dataDir: dir });
  await applyMigrations(db.adapterFactory);
  await db.close();
  const conf = path.join(dir, "pglite", "postgresql.conf");
  writeFileSync(conf, readFileSync(conf, "utf8").replace(/^timezone = .*$/m, `timezone = '${zone}'`));
  return dir;
}

describe("an embedded database made on a machine outside UTC", () => {
  it.each(["Etc/GMT-1", "Etc/GMT+5"])("(%s) writes the times of now() in UTC", async (zone) => {
    const db = await openDatabase({ dataDir: await folderMadeIn(zone) });
    try {
      const [row] = await db.prisma.$queryRawUnsafe<{ zone: string; now: Date }[]>("SELECT current_setting('TimeZone') AS zone, now()::timestamp AS now");
      expect(row.zone).toBe("UTC");
      expect(Math.abs(row.now.getTime() - Date.now())).toBeLessThan(60_000);
    } finally {
      await db.close();
    }
  });

  it("(Berlin) accepts a sign-in code it just sent", async () => {
    const db = await openDatabase({ dataDir: await folderMadeIn("Etc/GMT-1") });
    const h = await harnessOn(db);
    try {
      const { accountId } = await h.signIn({ email: "ada@example.com" });
      expect(accountId).toBeTruthy();
    } finally {
      await h.close();
    }
  });
});
