// Starting again after a crash (fourteenth review): a PGlite lock left by a process killed hard
// named the same process id (1) the restarted container's process got, so it looked held for
// ever. (A revoked bootstrap key at start: test/ops.startup.test.ts.) The process id cannot be
// handed to a child, so the lock is taken here, as a process started with that id would.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DatabaseInUse, lockPgliteFolder } from "../src/db/pglite-lock.ts";

describe("the embedded database's lock", () => {
  const root = mkdtempSync(path.join(tmpdir(), "linkgate-lock-"));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("left by another process that had this process's id is stale; held by this process it is not", () => {
    const dir = path.join(root, "pglite");
    writeFileSync(`${dir}.lock`, `${process.pid}\n`); // as a process killed hard, with the same id, left it
    const release = lockPgliteFolder(dir);
    try {
      expect(() => lockPgliteFolder(dir)).toThrow(DatabaseInUse);
    } finally {
      release();
    }
  });
});
