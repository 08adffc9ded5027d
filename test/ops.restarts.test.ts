// Starting again after a crash (fourteenth review): a PGlite lock left by a process killed hard
// named the same process id (1) the restarted container's process got, so it looked held for
// ever. (A revoked bootstrap key at start: test/ops.startup.test.ts.) The process id cannot be
// handed to a child, so the lock is taken here, as a process started with that id would. A lock
// left by a process that exited but was never reaped (31st review) is stale too.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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

  it.runIf(process.platform === "linux")("left by a process that exited but was never reaped is stale", async () => {
    const dir = path.join(root, "zombie");
    // The holder is a child of a shell that then becomes `sleep`, which never waits for children:
    // once the holder exits it stays a zombie, answering signal 0, until the sleep ends.
    const holder = `require("fs").writeFileSync(${JSON.stringify(`${dir}.lock`)}, process.pid + " other\\n")`;
    const shell = spawn("sh", ["-c", `"${process.execPath}" -e '${holder}' & exec sleep 30`], { stdio: "ignore" });
    try {
      const pid = await lockWrittenBy(`${dir}.lock`);
      await until(() => readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z "));
      expect(() => process.kill(pid, 0)).not.toThrow(); // what made it look alive
      const release = lockPgliteFolder(dir);
      expect(readFileSync(`${dir}.lock`, "utf8").startsWith(`${process.pid} `)).toBe(true);
      release();
    } finally {
      shell.kill("SIGKILL");
    }
  });
});

async function lockWrittenBy(file: string): Promise<number> {
  await until(() => existsSync(file) && readFileSync(file, "utf8").endsWith("\n"));
  return Number.parseInt(readFileSync(file, "utf8"), 10);
}

/** Polls a condition every 10 ms for at most 10 s (a Node child starts in well under a second). */
async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (condition()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error("condition not reached within 10 s");
}
