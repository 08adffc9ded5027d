// Every test file gets its own database: a fresh in-memory PGlite, and, when DATABASE_URL or
// TEST_DATABASE_URL names a Postgres server, a freshly created database on it that is
// dropped afterwards. Migrations are applied the way `npm start` applies them: once per run by
// test/support/global-setup.ts, whose migrated databases every file then copies; outside
// vitest (benchmarks) each database is migrated on its own.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import pg from "pg";
import { openDatabase, type Database } from "../../src/db/client.ts";
import { applyMigrations } from "../../src/db/migrations.ts";

export type Backend = "pglite" | "postgres";

export const serverUrl = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL;

/** Where the global setup leaves the migrated PGlite data directory and Postgres template. */
export const SNAPSHOT_ENV = "LINKGATE_TEST_PGLITE_SNAPSHOT";
export const TEMPLATE_ENV = "LINKGATE_TEST_PG_TEMPLATE";
/** Where it leaves the PGlite data directory initdb made, before any migration. */
export const EMPTY_SNAPSHOT_ENV = "LINKGATE_TEST_PGLITE_EMPTY_SNAPSHOT";

/**
 * The migrated data directory as PGlite loads it (it asks for the whole tarball with
 * `arrayBuffer()`). Node 20's own Blob hands its bytes over in small chunks and joins them: for
 * the 41 MB of the whole dump, 1.2 to 1.6 s of CPU per database opened against 1.0 to 1.3 s from
 * a buffer in memory, on a quiet machine of this 2-core kind (alternating, 4 of each), and the
 * suite opens some 140 (the dump opened here is smaller now: global-setup.ts). A copy (a Buffer's slice() would be a view), so nothing PGlite does with it reaches
 * the next database.
 */
class Snapshot extends Blob {
  constructor(private readonly tarball: Uint8Array) {
    super();
  }
  override async arrayBuffer(): Promise<ArrayBuffer> {
    return new Uint8Array(this.tarball).buffer;
  }
}

const snapshots = new Map<string, Blob>();

function snapshotIn(env: string): Blob | undefined {
  const file = process.env[env];
  if (file && !snapshots.has(env)) snapshots.set(env, new Snapshot(readFileSync(file)));
  return snapshots.get(env);
}

/** The migrated database the global setup dumped (undefined outside a `vitest run`). */
export const migratedSnapshot = (): Blob | undefined => snapshotIn(SNAPSHOT_ENV);

/** The database initdb made, no migration applied, as the global setup dumped it (undefined outside a `vitest run`). */
export const emptySnapshot = (): Blob | undefined => snapshotIn(EMPTY_SNAPSHOT_ENV);

/** The backends this run covers; use with describe.each. */
export const backends: Backend[] = serverUrl ? ["pglite", "postgres"] : ["pglite"];

export type TestDatabase = Database & { url?: string };

/**
 * The connect timeout of test databases on Postgres. Test files run PGlite beside Postgres in one
 * process: PGlite's start holds the event loop for 1.6 s on an idle machine of this kind, and a
 * busy one stretches that past the product's 5 s, which timed out a Postgres harness starting
 * beside a PGlite one in CI (Connection terminated due to connection timeout).
 */
export const TEST_CONNECT_TIMEOUT_MS = 30_000;

/** `empty`: no migrations at all, for the tests of the migrations themselves. */
export async function openTestDatabase(backend: Backend, opts: { poolSize?: number; empty?: boolean } = {}): Promise<TestDatabase> {
  if (backend === "pglite") {
    const from = opts.empty ? emptySnapshot() : migratedSnapshot();
    const db = await openDatabase({ dataDir: "memory://", pgliteSnapshot: from });
    if (!from && !opts.empty) await applyMigrations(db.adapterFactory);
    return db;
  }
  if (!serverUrl) throw new Error("postgres backend needs TEST_DATABASE_URL or DATABASE_URL");
  const name = `lg_test_${randomBytes(6).toString("hex")}`;
  const template = opts.empty ? undefined : process.env[TEMPLATE_ENV];
  await adminQuery(template ? `CREATE DATABASE ${name} TEMPLATE ${template}` : `CREATE DATABASE ${name}`);
  const url = withDatabase(serverUrl, name);
  const db = await openDatabase({ databaseUrl: url, dataDir: "", poolSize: opts.poolSize, connectTimeoutMs: TEST_CONNECT_TIMEOUT_MS });
  if (!template && !opts.empty) await applyMigrations(db.adapterFactory);
  return {
    ...db,
    url,
    async close() {
      await db.close();
      await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

export function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** One statement on the server's admin database (CREATE and DROP DATABASE). */
export async function adminQuery(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
