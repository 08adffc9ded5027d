// The embedded database's start: PGlite clears its whole buffer cache in WebAssembly every time
// it opens, so Postgres's default of 128 MB was half a second of every start, test database and
// CLI command (bench/RESULTS.md, start). No test can time that on a shared machine; this one
// keeps the setting that removed it, as README's "When to move from PGlite" states it.
import { describe, expect, it } from "vitest";
import { openDatabase } from "../src/db/client.ts";
import { migratedSnapshot } from "./support/db.ts";

describe("the embedded database", () => {
  it("keeps 32 MB of pages in its own cache, not Postgres's 128 MB", async () => {
    const db = await openDatabase({ dataDir: "memory://", pgliteSnapshot: migratedSnapshot() });
    try {
      if (db.driver.kind !== "pglite") throw new Error("expected PGlite");
      const shown = await db.driver.pglite.query<{ shared_buffers: string }>("SHOW shared_buffers");
      expect(shown.rows).toEqual([{ shared_buffers: "32MB" }]);
    } finally {
      await db.close();
    }
  });
});
