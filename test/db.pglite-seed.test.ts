// A first start on an empty PGlite folder copies the empty cluster the install prepared
// (src/db/pglite-seed.ts) instead of running initdb: the folder then holds that cluster, a copy
// cut off half-way is made again, and a folder that holds a database is never touched.
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openDatabase } from "../src/db/client.ts";
import { applyMigrations } from "../src/db/migrations.ts";
import { adoptPgliteSeed, pgliteSeedDir } from "../src/db/pglite-seed.ts";

const folders: string[] = [];
afterAll(() => folders.forEach((f) => rmSync(f, { recursive: true, force: true })));
const dataDir = () => {
  const dir = mkdtempSync(path.join(tmpdir(), "linkgate-seed-"));
  folders.push(dir);
  return dir;
};

const seed = pgliteSeedDir();
/** A cluster's system identifier: the first 8 bytes of global/pg_control, which initdb draws anew for every cluster. */
const identifierOf = (cluster: string) => readFileSync(path.join(cluster, "global", "pg_control")).readBigUInt64LE(0);

async function openedIdentifier(dir: string): Promise<bigint> {
  const db = await openDatabase({ dataDir: dir });
  try {
    await applyMigrations(db.adapterFactory);
    const rows = await db.prisma.$queryRaw<{ id: string }[]>`SELECT system_identifier::text AS id FROM pg_control_system()`;
    return BigInt(rows[0].id);
  } finally {
    await db.close();
  }
}

describe("the prepared PGlite cluster", () => {
  it("is made by the install (the build), once per PGlite version", () => {
    expect(existsSync(path.join(seed, "PG_VERSION"))).toBe(true);
    expect(path.basename(seed)).toMatch(/^pglite-\d+\.\d+\.\d+/);
  });

  it("can be read by every user: the one who installs is often not the one who runs the server", () => {
    const modes = (dir: string): number[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
        const at = path.join(dir, e.name);
        return e.isDirectory() ? [statSync(at).mode & 0o005, ...modes(at)] : [(statSync(at).mode & 0o004) | 0o001];
      });
    expect(statSync(seed).mode & 0o005).toBe(0o005);
    expect(new Set(modes(seed))).toEqual(new Set([0o005]));
  });

  it("is what a first start on an empty folder begins from, and migrations then run on it", async () => {
    const dir = dataDir();
    expect(await openedIdentifier(dir)).toBe(identifierOf(seed));
    // the folder is a database of its own from then on: starting again keeps it
    expect(await openedIdentifier(dir)).toBe(identifierOf(seed));
  });

  it("is copied as the running user's own, also from an install made read-only", async () => {
    // an image may `chmod -R a-w` its checkout: the copy kept the modes, and PGlite, run by a
    // user other than root, aborted on its first write (docs/operations.md, "Running in a container")
    const readOnly = path.join(dataDir(), "seed");
    cpSync(seed, readOnly, { recursive: true });
    const modes = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
        const at = path.join(dir, e.name);
        return e.isDirectory() ? [`dir ${(statSync(at).mode & 0o777).toString(8)}`, ...modes(at)] : [`file ${(statSync(at).mode & 0o777).toString(8)}`];
      });
    const setModes = (dir: string, dirs: number, files: number) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const at = path.join(dir, e.name);
        if (e.isDirectory()) chmodSync(at, 0o755), setModes(at, dirs, files);
        chmodSync(at, e.isDirectory() ? dirs : files);
      }
    };
    setModes(readOnly, 0o555, 0o444);
    try {
      const cluster = path.join(dataDir(), "pglite");
      mkdirSync(cluster, { mode: 0o700 });
      expect(adoptPgliteSeed(cluster, readOnly)).toBe(true);
      expect(new Set(modes(cluster))).toEqual(new Set(["dir 700", "file 600"]));
    } finally {
      setModes(readOnly, 0o755, 0o644); // removable again by a user who is not root
    }
  });

  it("is copied again over a copy cut off before its end", async () => {
    const dir = dataDir();
    const cluster = path.join(dir, "pglite");
    mkdirSync(cluster, { recursive: true });
    // a start killed half-way: some of the files, and never PG_VERSION, which is copied last
    for (const entry of readdirSync(seed).filter((e) => e !== "PG_VERSION").slice(0, 5)) {
      cpSync(path.join(seed, entry), path.join(cluster, entry), { recursive: true });
    }
    expect(await openedIdentifier(dir)).toBe(identifierOf(seed));
  });

  it("is never copied over a folder that holds a database", async () => {
    const dir = dataDir();
    const db = await openDatabase({ dataDir: dir });
    await applyMigrations(db.adapterFactory);
    await db.prisma.$executeRawUnsafe("CREATE TABLE kept (v int)");
    await db.prisma.$executeRawUnsafe("INSERT INTO kept VALUES (42)");
    await db.close();
    expect(adoptPgliteSeed(path.join(dir, "pglite"))).toBe(false);
    const again = await openDatabase({ dataDir: dir });
    try {
      expect(await again.prisma.$queryRawUnsafe("SELECT v FROM kept")).toEqual([{ v: 42 }]);
    } finally {
      await again.close();
    }
  });

  it("missing, leaves the folder to PGlite's initdb", () => {
    const dir = dataDir();
    expect(adoptPgliteSeed(dir, path.join(dir, "no-such-seed"))).toBe(false);
    expect(readdirSync(dir)).toEqual([]);
    // and one whose copy never finished is not taken for a cluster either
    const half = dataDir();
    copyFileSync(path.join(seed, "postgresql.conf"), path.join(half, "postgresql.conf"));
    expect(adoptPgliteSeed(dataDir(), half)).toBe(false);
  });

  it("that cannot be copied, leaves the folder emptied, as a first start finds it", async () => {
    const dir = dataDir();
    const cluster = path.join(dir, "pglite");
    // a folder left in the way of one of the cluster's files
    mkdirSync(path.join(cluster, "postgresql.conf"), { recursive: true });
    expect(adoptPgliteSeed(cluster)).toBe(false);
    expect(readdirSync(cluster)).toEqual([]);
    // and the start that follows finds an empty folder: a database, migrated
    expect(await openedIdentifier(dir)).toBe(identifierOf(seed));
  });
});
