// Reads prisma/migrations in Prisma's own folder layout, applies it, and checks it against
// prisma/schema.prisma. The layout stays Prisma's so `prisma migrate deploy` keeps working
// on machines that have the native engine. Those migrations change tables only; the
// functions and triggers are repeatable migrations in .sql files beside their features
// (src/db/repeatable.ts), applied right after them.
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { SqlDriverAdapter, SqlMigrationAwareDriverAdapterFactory } from "@prisma/driver-adapter-utils";
import type { MigrationList } from "@prisma/schema-engine-wasm";
import { ConfigError } from "../config.ts";
import { withSignalsHeld } from "../lifecycle.ts";
import { pendingMigrations } from "./applied-migrations.ts";
import { applyRepeatable } from "./repeatable.ts";
import { withSchemaEngine } from "./schema-engine.ts";

export const prismaDir = fileURLToPath(new URL("../../prisma/", import.meta.url));
const migrationsDir = path.join(prismaDir, "migrations");
const noFilter = { externalTables: [], externalEnums: [] };

export async function readSchema(): Promise<string> {
  return readFile(path.join(prismaDir, "schema.prisma"), "utf8");
}

export async function readMigrations(): Promise<MigrationList> {
  const entries = await readdir(migrationsDir, { withFileTypes: true });
  const dirs = entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
  return {
    baseDir: migrationsDir,
    lockfile: {
      path: "migration_lock.toml",
      content: await readFile(path.join(migrationsDir, "migration_lock.toml"), "utf8"),
    },
    shadowDbInitScript: "",
    migrationDirectories: await Promise.all(
      dirs.map(async (dir) => ({
        path: dir,
        migrationFile: {
          path: "migration.sql",
          content: { tag: "ok" as const, value: await readFile(path.join(migrationsDir, dir, "migration.sql"), "utf8") },
        },
      })),
    ),
  };
}

/** This build's ordinary migrations (their directory names), in order. */
export async function knownMigrations(): Promise<string[]> {
  return (await readMigrations()).migrationDirectories.map((d) => d.path);
}

/**
 * Applies the pending ordinary migrations, then the repeatable files whose content changed;
 * returns the names of both (migration directories, then repeatable files such as
 * `linking/link-verify.sql`).
 *
 * Most starts find nothing pending, and asking that first spares loading and running Prisma's
 * schema engine (WebAssembly): about 0.2 s of a 2 s start on PGlite (bench/RESULTS.md, start).
 * When anything is missing the engine runs as always, in this process's migration turn
 * (inMigrationTurn), so concurrent starts apply each migration once.
 */
export async function applyMigrations(adapterFactory: SqlMigrationAwareDriverAdapterFactory): Promise<string[]> {
  const migrationsList = await readMigrations();
  const known = migrationsList.migrationDirectories.map((d) => d.path);
  const adapter = await adapterFactory.connect();
  const pending = await releaseCutOffPgliteMigration(adapterFactory, adapter)
    .then(() => pendingMigrations(adapter, known))
    .finally(() => adapter.dispose());
  // A SIGTERM in the middle of a migration would leave it failed, refusing every later start;
  // held until the function files are in too, which `db migrate` counts among what it applies.
  return withSignalsHeld("applying the database's migrations", async () => {
    const applied = pending.length === 0 ? [] : await inMigrationTurn(adapterFactory, () => applyOrdinaryMigrations(adapterFactory, migrationsList));
    return [...applied, ...(await applyRepeatable(adapterFactory, { knownMigrations: known }))];
  });
}

/**
 * On the embedded database, a migration recorded as started and never finished was cut off by a
 * kill -9 or a lost machine, or failed (docs/operations.md, "A migration that failed"): the
 * folder is this process's alone (src/db/pglite-lock.ts), so nobody is applying it now, and its
 * file ran in one transaction with the mark that it finished (migratingWholeFiles in
 * src/db/client.ts), so none of it is there. It is marked rolled back, as `prisma migrate resolve
 * --rolled-back` does, and applied again below (a file that failed fails again, and says why).
 * Left failed, it refused every later start with a repair that needs SQL nothing can run on an
 * embedded folder. On Postgres a file is applied statement by statement and another process may
 * be applying it: that stays the operator's to repair.
 */
async function releaseCutOffPgliteMigration(adapterFactory: SqlMigrationAwareDriverAdapterFactory, adapter: SqlDriverAdapter): Promise<void> {
  if (adapterFactory.adapterName === "@prisma/adapter-pg") return;
  const { rows } = await adapter.queryRaw({ sql: "SELECT to_regclass('_prisma_migrations') IS NOT NULL", args: [], argTypes: [] });
  if (rows[0]?.[0] !== true) return;
  await adapter.executeRaw({
    sql: "UPDATE _prisma_migrations SET rolled_back_at = now() WHERE finished_at IS NULL AND rolled_back_at IS NULL",
    args: [],
    argTypes: [],
  });
}

/**
 * What `npm run db:migrate` and `npx linkgate db migrate` print: one wording for one command
 * (docs/cli.md). `applied` holds the migrations and the repeatable SQL files applied.
 */
export function describeApplied(applied: string[]): string {
  return applied.length ? `applied ${applied.length} migration(s):\n${applied.map((m) => `  ${m}`).join("\n")}` : "the database is up to date";
}

/** The migration turn's advisory lock ("lgmg"); Prisma's engine takes 72707369 inside it. */
const MIGRATION_TURN = 0x6c676d67;
const TURN_POLL_MS = 200;
/** Longer than any migration of this folder takes on a large database (docs/operations.md). */
const TURN_WAIT_MS = 15 * 60_000;

/**
 * Runs `fn` (Prisma's engine) once no other process on this Postgres database is applying
 * migrations. Processes waiting for their turn ask for it again every TURN_POLL_MS with
 * pg_try_advisory_lock, so none waits inside a statement: one blocked in the engine's own
 * `pg_advisory_lock`, as before, held a snapshot, and a CREATE INDEX CONCURRENTLY of the
 * process applying migrations waits for every older snapshot: Postgres called it a deadlock and
 * ended the waiting start (31st review: 2 of 3 servers started at once on a new database died
 * with "deadlock detected"). The lock is held on a connection of the turn's own pool, released
 * when that pool ends. PGlite has one process per folder (pglite-lock.ts) and no turn.
 */
async function inMigrationTurn<T>(adapterFactory: SqlMigrationAwareDriverAdapterFactory, fn: () => Promise<T>): Promise<T> {
  if (adapterFactory.adapterName !== "@prisma/adapter-pg") return fn();
  const adapter = await adapterFactory.connect();
  try {
    const deadline = Date.now() + TURN_WAIT_MS;
    for (;;) {
      const { rows } = await adapter.queryRaw({ sql: `SELECT pg_try_advisory_lock(${MIGRATION_TURN})`, args: [], argTypes: [] });
      if (rows[0]?.[0] === true) break;
      if (Date.now() > deadline) throw new MigrationFailed(`could not apply the database's migrations: another process has been applying them for ${TURN_WAIT_MS / 60_000} minutes`);
      await new Promise((resolve) => setTimeout(resolve, TURN_POLL_MS));
    }
    return await fn();
  } finally {
    await adapter.dispose();
  }
}

/**
 * A migration that failed, now or at an earlier start (Prisma then refuses to apply any other
 * until it is resolved): one line at start naming what the engine said and where the recovery is
 * written (docs/operations.md, "A migration that failed"), instead of the engine's stack trace
 * (25th review).
 */
export class MigrationFailed extends ConfigError {}

/** The ordinary migrations alone, through Prisma's schema engine (tests compare against it); applyMigrations holds the signals around it. */
export async function applyOrdinaryMigrations(
  adapterFactory: SqlMigrationAwareDriverAdapterFactory,
  migrationsList?: MigrationList,
): Promise<string[]> {
  migrationsList ??= await readMigrations();
  const list = migrationsList;
  const schema = await readSchema();
  try {
    return await withSchemaEngine(schema, adapterFactory, async (engine) => {
      const out = await engine.applyMigrations({ migrationsList: list, filters: noFilter });
      return out.appliedMigrationNames;
    });
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const lines = message.split("\n").map((l) => l.trim());
    // the engine's message, without the Rust span trace after it ("0: sql_schema_connector::…"),
    // which names the migration it was applying
    const end = lines.findIndex((l) => /^\d+: /.test(l));
    const said = lines.slice(0, end < 0 ? undefined : end).filter(Boolean).join(" ");
    const name = /migration_name="([^"]+)"/.exec(message)?.[1];
    // the recovery is for a migration that failed; another fault (a database that is not empty
    // and not linkgate's, the engine's lock timing out) is said as it is (26th review)
    const failed = !!name || /failed migrations/.test(message);
    throw new MigrationFailed(`could not apply the database's migrations${name ? ` (at ${name})` : ""}: ${said}${failed ? ` (see "A migration that failed" in docs/operations.md)` : ""}`);
  }
}

/** SQL that takes the migrations folder to the datamodel; empty when they agree. */
export async function pendingSchemaChanges(
  adapterFactory: SqlMigrationAwareDriverAdapterFactory,
  schema?: string,
): Promise<string> {
  schema ??= await readSchema();
  const migrations = await readMigrations();
  return withSchemaEngine(schema, adapterFactory, async (engine) => {
    const res = await engine.diff({
      from: { tag: "migrations", ...migrations },
      to: { tag: "schemaDatamodel", files: [{ path: "schema.prisma", content: schema }] },
      script: true,
      exitCode: null,
      filters: noFilter,
    });
    return (res.stdout ?? "").replace(/^-- This is an empty migration\.\s*$/m, "").trim();
  });
}
