// Runs once per `vitest run`, before any test file: migrates one embedded database and one
// Postgres database, then lets every test file start from a copy of them instead of running
// initdb and every migration again. Measured on this 2-core machine: a PGlite file database
// went from initdb + migrations to a snapshot load (~4× less CPU), a Postgres one from ~2.7 s
// of migrations to a template copy. Test files still get databases of their own.
import { execFile } from "node:child_process";
import { mkdirSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { promisify } from "node:util";
import { openDatabase } from "../../src/db/client.ts";
import { applyMigrations } from "../../src/db/migrations.ts";
import { buildDashboard } from "./browser.ts";
import { adminQuery as admin, EMPTY_SNAPSHOT_ENV, SNAPSHOT_ENV, TEMPLATE_ENV, serverUrl, TEST_CONNECT_TIMEOUT_MS, withDatabase } from "./db.ts";
import { buildPages } from "./pages.ts";
import { DATA_DIR_ENV } from "./server-entry.ts";

let dir: string | undefined;
let template: string | undefined;

export async function setup(): Promise<void> {
  dir = await mkdtemp(path.join(tmpdir(), "linkgate-test-"));
  keepTemporaryFilesIn(dir);
  const [snapshot] = await Promise.all([
    pgliteSnapshots(dir).then(async ({ whole, withoutTemplates, empty }) => {
      process.env[EMPTY_SNAPSHOT_ENV] = empty;
      process.env[DATA_DIR_ENV] = await migratedDataFolder(whole, path.join(dir!, "data-migrated"));
      return withoutTemplates;
    }),
    serverUrl ? migratedTemplate() : undefined,
    buildServerIfStale(),
    buildUi(),
  ]);
  process.env[SNAPSHOT_ENV] = snapshot;
}

export async function teardown(): Promise<void> {
  if (template) await admin(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`).catch(() => {});
  if (dir) await rm(dir, { recursive: true, force: true });
}

/**
 * Every temporary folder of the run (the servers' data folders, PGlite's, Chromium's profiles)
 * is made inside the run's own folder, which teardown removes: the test processes and the
 * processes they start read TMPDIR through os.tmpdir(). A PGlite data folder is about 40 MB, and
 * the files that start real servers made some 25 of them a run, which stayed in /tmp before.
 */
function keepTemporaryFilesIn(runDir: string): void {
  const tmp = path.join(runDir, "tmp");
  mkdirSync(tmp);
  process.env.TMPDIR = tmp;
}

/**
 * Child processes run the built server, as `npm start` does (test/support/server-entry.ts):
 * what `npm test`'s pretest does, again for a `vitest run` started without npm. A no-op unless a
 * source file is newer than the last build.
 */
async function buildServerIfStale(): Promise<void> {
  const script = new URL("../../scripts/build-server.mjs", import.meta.url).pathname;
  await promisify(execFile)(process.execPath, [script, "--if-stale"]);
}

/**
 * The hosted pages and the dashboard, from the current sources, once per run. Built by each
 * browser file instead, one file's build (which first empties pages/dist) could run while another
 * file's Chromium is loading those pages from the same folder.
 */
async function buildUi(): Promise<void> {
  await buildPages();
  await buildDashboard();
}

/**
 * The embedded database, dumped three times. Migrated: whole, for the data folder that processes start
 * from, and without the databases template0 and template1 for the in-memory ones every test file
 * opens (test/support/db.ts), since each open unpacks the whole dump. The templates are 14.5 of
 * its 41 MB and 600 of its 1,162 files: an open took 0.91 s of CPU without them against 1.23 s
 * (10 of each, alternating, on a quiet 2-core machine), and the suite opens about 140. Only
 * CREATE DATABASE reads a template, and no test runs it on PGlite. Dumped first, before any
 * migration: the empty database initdb makes, which the tests of the migrations start from
 * (a load of it took about 1.1 s of CPU here against 4.4 s for initdb in a warm process).
 */
async function pgliteSnapshots(into: string): Promise<{ whole: string; withoutTemplates: string; empty: string }> {
  const db = await openDatabase({ dataDir: "memory://" });
  try {
    if (db.driver.kind !== "pglite") throw new Error("expected an embedded database");
    const pglite = db.driver.pglite;
    const dump = async (name: string) => {
      const file = path.join(into, name);
      await writeFile(file, Buffer.from(await (await pglite.dumpDataDir("none")).arrayBuffer()));
      return file;
    };
    // as initdb left it, for the tests of the migrations themselves (test/support/db.ts)
    const empty = await dump("pglite-empty.tar");
    await applyMigrations(db.adapterFactory);
    const whole = await dump("pglite-migrated.tar");
    // one statement each: DROP DATABASE cannot run in the transaction a multi-statement exec makes
    for (const sql of ["ALTER DATABASE template0 IS_TEMPLATE false", "DROP DATABASE template0", "ALTER DATABASE template1 IS_TEMPLATE false", "DROP DATABASE template1", "CHECKPOINT"]) {
      await pglite.query(sql);
    }
    return { whole, withoutTemplates: await dump("pglite-migrated-without-templates.tar"), empty };
  } finally {
    await db.close();
  }
}

/**
 * A LINKGATE_DATA_DIR holding the migrated PGlite database, for the tests that start real
 * processes (test/support/server-entry.ts migratedDataDir): a copy of it starts in about 5 s
 * here, an empty folder in about 12 (initdb and every migration, in WebAssembly).
 */
async function migratedDataFolder(snapshotFile: string, into: string): Promise<string> {
  const db = await openDatabase({ dataDir: into, pgliteSnapshot: new Blob([await readFile(snapshotFile)]) });
  await db.close();
  return into;
}

async function migratedTemplate(): Promise<void> {
  const name = `lg_template_${randomBytes(6).toString("hex")}`;
  await admin(`CREATE DATABASE ${name}`);
  template = name;
  const db = await openDatabase({ databaseUrl: withDatabase(serverUrl!, name), dataDir: "", connectTimeoutMs: TEST_CONNECT_TIMEOUT_MS });
  try {
    await applyMigrations(db.adapterFactory);
  } finally {
    await db.close();
  }
  // CREATE DATABASE … TEMPLATE refuses a template that has connections: all are closed now.
  process.env[TEMPLATE_ENV] = name;
}
