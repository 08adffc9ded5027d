// The entry points that `npm start`, `npm run worker` and `npm run db:migrate` run (package.json,
// README.md): the server bundled into dist/ and started with plain node, no TypeScript loader.
// test/support/global-setup.ts builds dist/ again whenever a source is newer than the build,
// so a child process runs the sources under test.
import { cpSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

const ROOT = path.resolve(import.meta.dirname, "../..");

export const MAIN = path.join(ROOT, "dist/main.js");
export const WORKER = path.join(ROOT, "dist/worker.js");
export const MIGRATE = path.join(ROOT, "dist/migrate-cli.js");
export const CLI = path.join(ROOT, "dist/cli.js");

/** Where the global setup leaves a data folder with the migrated PGlite database. */
export const DATA_DIR_ENV = "LINKGATE_TEST_PGLITE_DATA_DIR";

/**
 * A new LINKGATE_DATA_DIR holding a copy of the suite's migrated PGlite database (test/support/
 * global-setup.ts), as on every start but the first; empty when the suite's setup did not run.
 * A test of the very first start on an empty folder makes its own folder with mkdtempSync.
 */
export function migratedDataDir(prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  const migrated = process.env[DATA_DIR_ENV];
  if (migrated) cpSync(migrated, dir, { recursive: true });
  return dir;
}
