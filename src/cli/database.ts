// The CLI opens the database `npm start` uses: DATABASE_URL (Postgres) when set, otherwise the
// PGlite folder under LINKGATE_DATA_DIR. The heavy modules load only here, so a usage error is
// reported without starting a database.
import { existsSync } from "node:fs";
import path from "node:path";
import type { Database } from "../db/client.ts";

export class CliFailure extends Error {}

type Target = { databaseUrl?: string; dataDir: string };

async function target(env: NodeJS.ProcessEnv): Promise<Target> {
  const { loadConfig } = await import("../config.ts");
  const config = loadConfig(env);
  return { databaseUrl: config.databaseUrl, dataDir: config.dataDir };
}

/** Opening a PGlite folder creates it: only `db migrate` may, not a command run in the wrong directory. */
function assertPgliteExists(dataDir: string): void {
  const dir = path.resolve(dataDir, "pglite");
  if (!existsSync(dir)) {
    throw new CliFailure(`no linkgate database in ${dir}: set LINKGATE_DATA_DIR (or DATABASE_URL) as for \`npm start\`, or create one with \`linkgate db migrate\``);
  }
}

export async function openConfiguredDatabase(env: NodeJS.ProcessEnv, opts: { create: boolean }): Promise<Database> {
  const t = await target(env);
  if (!t.databaseUrl) {
    if (!opts.create) assertPgliteExists(t.dataDir);
  } else {
    // the driver's one-line reason, as `npm start` says it, instead of the ORM's internals
    const { unreachableDatabase } = await import("../lifecycle.ts");
    const problem = await unreachableDatabase(t.databaseUrl);
    if (problem) throw new CliFailure(problem);
  }
  const [{ openDatabase }, { DatabaseInUse }] = await Promise.all([import("../db/client.ts"), import("../db/pglite-lock.ts")]);
  try {
    // An admin command runs a few statements one after another: two connections are plenty.
    return await openDatabase({ ...t, poolSize: 2 });
  } catch (err) {
    // a PGlite folder that a server (or anything else) holds (src/db/pglite-lock.ts)
    if (err instanceof DatabaseInUse) throw new CliFailure(err.message);
    throw err;
  }
}

/** Runs `fn` on the configured database, which must exist and be fully migrated, and closes it. */
export async function withDatabase<T>(env: NodeJS.ProcessEnv, fn: (db: Database) => Promise<T>): Promise<T> {
  const db = await openConfiguredDatabase(env, { create: false });
  try {
    const [{ knownMigrations }, { pendingMigrations }] = await Promise.all([import("../db/migrations.ts"), import("../db/applied-migrations.ts")]);
    const pending = await pendingMigrations(db.prisma, await knownMigrations());
    if (pending.length) throw new CliFailure(`the database lacks ${pending.length} migration(s) of this version: run \`linkgate db migrate\` first`);
    return await fn(db);
  } finally {
    await db.close();
  }
}

/**
 * A list filtered by `--project` that came back empty: an id with a typo listed nothing, which
 * read as a project without keys or webhooks. No such project fails the command (docs/cli.md,
 * exit codes); asked only of an empty list.
 */
export async function assertProjectListed<T>(db: Database, projectId: string | undefined, rows: T[]): Promise<T[]> {
  if (projectId && rows.length === 0 && !(await db.prisma.project.count({ where: { id: projectId } }))) throw new CliFailure("no such project");
  return rows;
}
