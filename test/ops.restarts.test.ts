// Starting again after something an operator does or a crash leaves (fourteenth review): the
// bootstrap key revoked with `linkgate keys revoke` made every later start crash with a stack
// trace (the key was stored again, against its hash's uniqueness); and a PGlite lock left by a
// process killed hard named the same process id (1) the restarted container's process got, so
// it looked held for ever.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bootstrapProject } from "../src/auth/projects.ts";
import { ConfigError } from "../src/config.ts";
import { sha256Hex } from "../src/crypto.ts";
import { DatabaseInUse, lockPgliteFolder } from "../src/db/pglite-lock.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";

describe.each(backends)("a start with a revoked bootstrap key on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  it("stops with one line naming the setting, and leaves the key revoked", async () => {
    const key = `lg_sk_test_${randomBytes(24).toString("base64url")}`;
    expect(await bootstrapProject(h.db.prisma, { secret: key })).toBeNull();
    expect(await bootstrapProject(h.db.prisma, { secret: key })).toBeNull(); // idempotent
    await h.db.prisma.apiKey.updateMany({ where: { keyHash: sha256Hex(key) }, data: { revokedAt: new Date() } });
    const start = bootstrapProject(h.db.prisma, { secret: key });
    await expect(start).rejects.toBeInstanceOf(ConfigError);
    await expect(bootstrapProject(h.db.prisma, { secret: key })).rejects.toThrow(/LINKGATE_BOOTSTRAP_API_KEY names a key that was revoked/);
    const rows = await h.db.prisma.apiKey.findMany({ where: { keyHash: sha256Hex(key) } });
    expect(rows).toHaveLength(1);
    expect(rows[0].revokedAt).not.toBeNull();
  });
});

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
