// The embedded database's folder holds people's addresses and sealed secrets (thirteenth
// review): made with the process's umask, it and most of its files were readable by every
// local user. It is the owner's alone now, a folder an earlier version made included.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError } from "../src/config.ts";
import { openDatabase } from "../src/db/client.ts";
import { migratedSnapshot } from "./support/db.ts";

describe("the embedded database's folder", () => {
  const root = mkdtempSync(path.join(tmpdir(), "linkgate-data-folder-"));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("is readable by its owner only, also when an earlier version made it open", async () => {
    const open = path.join(root, "earlier");
    mkdirSync(path.join(open, "pglite"), { recursive: true });
    chmodSync(path.join(open, "pglite"), 0o755);
    for (const dataDir of [path.join(root, "fresh"), open]) {
      // from the migrated dump, as the test databases are: the folder is made and its mode set
      // before PGlite fills it, and an initdb instead took about 5 s of CPU per folder here
      const db = await openDatabase({ dataDir, pgliteSnapshot: migratedSnapshot() });
      try {
        expect(statSync(path.join(dataDir, "pglite")).mode & 0o777, dataDir).toBe(0o700);
      } finally {
        await db.close();
      }
    }
  });

  // ops review: LINKGATE_DATA_DIR naming a file (or a folder under one) stopped the start with
  // ENOTDIR's stack trace instead of the one line that says what to set
  it("refuses a file where the folder should be in one line naming LINKGATE_DATA_DIR", async () => {
    const file = path.join(root, "a-file");
    writeFileSync(file, "");
    mkdirSync(path.join(root, "with-file"));
    writeFileSync(path.join(root, "with-file", "pglite"), "");
    for (const dataDir of [file, path.join(file, "below"), path.join(root, "with-file")]) {
      const err = await openDatabase({ dataDir, pgliteSnapshot: migratedSnapshot() }).then(
        (db) => db.close().then(() => null),
        (e: unknown) => e,
      );
      expect(err, dataDir).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toMatch(/^cannot write the data folder .*: a file is in the way, not a folder\. Set LINKGATE_DATA_DIR to a folder/);
    }
  });
});
