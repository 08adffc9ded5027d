// One data layer, two backends: a Postgres server when DATABASE_URL is set, otherwise an
// embedded PGlite persisted in a folder. Both go through Prisma 7's engine-free client.
import { createHash } from "node:crypto";
import { chmodSync, mkdirSync, statSync } from "node:fs";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { PrismaPg } from "@prisma/adapter-pg";
import type { SqlMigrationAwareDriverAdapterFactory } from "@prisma/driver-adapter-utils";
import pg from "pg";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { PrismaClient } from "../generated/prisma/client.ts";
import { writingDataFolder } from "../data-folder.ts";
import { RefusalAwarePool } from "./connect-refusals.ts";
import { shareConnections } from "./connection-share.ts";
import { lockPgliteFolder } from "./pglite-lock.ts";
import { adoptPgliteSeed } from "./pglite-seed.ts";

export type Db = PrismaClient;
export type Tx = Parameters<Parameters<PrismaClient["$transaction"]>[0]>[0];

/**
 * The driver under Prisma's adapter, for the few statements that run per delivery (src/db/fast.ts):
 * the same pool of connections, or the same PGlite instance, without Prisma's query path.
 */
export type Driver = { kind: "postgres"; pool: pg.Pool } | { kind: "pglite"; pglite: PGlite };

export type Database = {
  prisma: PrismaClient;
  kind: "postgres" | "pglite";
  driver: Driver;
  adapterFactory: SqlMigrationAwareDriverAdapterFactory;
  /**
   * LISTEN on a channel; returns an unsubscribe function. `onLost`: the connection holding the
   * LISTEN ended without being unsubscribed (a restart of the server, its backend terminated).
   */
  listen(channel: string, onNotify: (payload: string) => void, onLost?: () => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
};

export type DatabaseOptions = {
  databaseUrl?: string;
  dataDir: string;
  poolSize?: number;
  /**
   * How long a new Postgres connection, or a request waiting for a free one, may take before it
   * fails (default 5 s, see openPostgres). Tests that run PGlite beside Postgres in one process
   * set more: PGlite's WebAssembly holds the event loop for seconds while it starts, and a
   * timer due during such a pause fires before the connection's answer is read.
   */
  connectTimeoutMs?: number;
  /**
   * An embedded database's data directory as dumped by PGlite's dumpDataDir: starting from it
   * skips initdb and every migration, ~4× faster than an empty database (the test suite opens
   * one per test file from a single migrated snapshot).
   */
  pgliteSnapshot?: Blob;
};

export async function openDatabase(opts: DatabaseOptions): Promise<Database> {
  return opts.databaseUrl ? openPostgres(opts.databaseUrl, opts.poolSize, opts.connectTimeoutMs) : openPglite(opts.dataDir, opts.pgliteSnapshot);
}

const CONNECT_TIMEOUT_MS = 5_000;

const preparedNames = new Map<string, string>();

/**
 * Raw statements whose SQL starts with the comment "prepared: <name>" (in SQL comment markers)
 * run as named prepared statements: each pooled connection parses and plans them once, and
 * after Postgres' first five custom plans runs them from a cached generic plan. Meant for hot
 * raw statements that must run inside a Prisma transaction (the outbox's enqueue); the
 * delivery engine's own statements go through src/db/fast.ts, which names them the same way.
 * Everything else stays unnamed, Prisma's own SQL included: it varies too much to cache. The
 * name carries a hash of the text, so a changed statement never meets a stale one. (Named
 * statements live on a server connection: a pooler in front of Postgres must keep them, e.g.
 * PgBouncer in session mode, or 1.21+ with prepared statement support.)
 */
function preparedName(query: { sql: string }): string {
  let name = preparedNames.get(query.sql);
  if (name === undefined) {
    const m = /^\s*\/\* prepared: ([a-z_]+) \*\//.exec(query.sql);
    if (!m) return undefined as unknown as string; // an unnamed statement
    name = `lg_${m[1]}_${createHash("sha256").update(query.sql).digest("hex").slice(0, 12)}`;
    preparedNames.set(query.sql, name);
  }
  return name;
}

/**
 * The settings linkgate's SQL and its drivers depend on, for every Postgres connection it opens.
 * Sent in the start-up packet, they win over the server's, the database's and the role's own
 * (`ALTER DATABASE/ROLE … SET`): an operator's default there must not change linkgate's rules
 * (docs/operations.md, "Database connections"). Each was seen to break something when set
 * otherwise on the role:
 * - TimeZone: the tables' times are `timestamp` without a time zone, read as UTC (openPostgres).
 * - DateStyle, IntervalStyle: pg parses the text Postgres sends; under `SQL, DMY` or `German`
 *   every time the fast path read was NaN (claimed deliveries, retries) and removing an
 *   identifier failed with a 500.
 * - extra_float_digits: the fast path sends times as float8 milliseconds; at -15 they came back
 *   rounded to one significant digit.
 * - default_transaction_isolation: the claim, the merges and the counters are written for READ
 *   COMMITTED (a row locked after a wait is read again as it is now); under REPEATABLE READ or
 *   SERIALIZABLE, delivery workers sharing a database failed their claims and the recording of
 *   their results with serialization failures (40001), logged as database errors and retried.
 * - search_path: Prisma names `public` in every statement, the migrations and the SQL functions
 *   name nothing. With a schema named after the role (`"$user"`, the default path's first
 *   entry), the first migration put the tables there and a later one failed, half applied; with
 *   another schema first, its table of the same name took the raw SQL's writes while Prisma read
 *   `public`'s.
 * client_encoding needs nothing here: pg always sends UTF8 in the start-up packet.
 */
const REQUIRED_SETTINGS: ReadonlyArray<readonly [string, string]> = [
  ["TimeZone", "UTC"],
  ["DateStyle", "ISO, MDY"],
  ["IntervalStyle", "postgres"],
  ["extra_float_digits", "1"],
  ["default_transaction_isolation", "read committed"],
  ["search_path", "public"],
];

/** As the server splits `options` at spaces, a space inside a value is escaped with a backslash. */
const REQUIRED_OPTIONS = REQUIRED_SETTINGS.map(([name, value]) => `-c ${name}=${value.replaceAll(" ", "\\ ")}`).join(" ");

/**
 * A connection's settings: jit off (openPostgres says why), then REQUIRED_SETTINGS. A URL's own
 * `options` win over the driver's (pg lets the URL win), so there the required settings are
 * added to them, last, as they must hold.
 */
export function connectionConfig(url: string): pg.PoolConfig {
  const parsed = URL.canParse(url) ? new URL(url) : null;
  const own = parsed?.searchParams.get("options");
  if (!parsed || own === null || own === undefined) return { connectionString: url, options: `-c jit=off ${REQUIRED_OPTIONS}` };
  parsed.searchParams.set("options", `${own} ${REQUIRED_OPTIONS}`);
  return { connectionString: parsed.toString() };
}

async function openPostgres(url: string, poolSize = 10, connectTimeoutMs = CONNECT_TIMEOUT_MS): Promise<Database> {
  // JIT off for the app's connections (unless the URL sets its own options): every query here is
  // short and indexed, and JIT kicks in on estimated cost alone. The delivery claim's generic
  // plan is estimated at ~190,000 with a million pending rows (it cannot know its LIMIT), so
  // each claim spent ~25 ms compiling 80 functions to run in 2 ms: 850 events/s instead of
  // 2,270 on the same database with 1,000,000 pending (bench/RESULTS.md).
  //
  // TimeZone UTC always: the tables' times are `timestamp` without a time zone, read as UTC, and
  // the SQL writes now() and to_timestamp() into them. On a server whose time zone is not UTC
  // (initdb takes the machine's) every delivery time was off by the offset, and the delivery
  // log rebuilt signatures with a timestamp that was never sent (30th review).
  //
  // A server that accepts connections but never answers (a partition, a hung host) must fail
  // requests within seconds, as 503s, not hold them until the OS gives up. In pg this also
  // bounds the wait for a free pool slot.
  const pool = new RefusalAwarePool({ ...connectionConfig(url), max: poolSize, connectionTimeoutMillis: connectTimeoutMs, keepAlive: true });
  // An idle client dying with the server (restart, failover) must not crash the process;
  // the pool replaces it on the next checkout.
  pool.on("error", () => {});
  shareConnections(pool);
  const adapterFactory = new PrismaPg(pool, { statementNameGenerator: preparedName });
  const prisma = new PrismaClient({ adapter: adapterFactory });
  return {
    prisma,
    kind: "postgres",
    driver: { kind: "postgres", pool },
    adapterFactory: new PrismaPg(connectionConfig(url)),
    async listen(channel, onNotify, onLost) {
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: connectTimeoutMs, keepAlive: true });
      client.on("error", () => {});
      await client.connect();
      client.on("notification", (n) => n.channel === channel && onNotify(n.payload ?? ""));
      await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      let unsubscribed = false;
      client.once("end", () => {
        if (!unsubscribed) onLost?.();
      });
      return async () => {
        unsubscribed = true;
        await client.end().catch(() => {});
      };
    },
    async close() {
      await prisma.$disconnect();
      await pool.end();
    },
  };
}

/**
 * PGlite's own start parameters with a smaller buffer cache. Postgres's default of 128 MB is
 * memory PGlite's WebAssembly clears at every start, which was 0.5 of the 1.2 s an open took
 * (measured with a CPU profile: one WebAssembly function under PGlite's callMain): with 32 MB a
 * CLI command on an existing folder took 2.0 s instead of 2.5 s on a 2-core machine, and every
 * `npm start`, worker and test database opens that much sooner. PGlite reads the pages it does
 * not keep through the operating system's own cache, and the embedded database is for trying
 * linkgate out and for small installations (README, "When to move from PGlite"), whose hot
 * pages fit in 32 MB.
 *
 * And UTC, as every Postgres connection (openPostgres): PGlite's initdb writes the machine's
 * time zone into the cluster's postgresql.conf, as a fixed offset. On a laptop in New York
 * (`Etc/GMT+5`) `now()` wrote times five hours behind the ones the gateway writes, so a code's
 * expiry, checked against the database's clock, was five hours late, and in Berlin an hour
 * early: every code had expired when it was sent.
 */
const PGLITE_START_PARAMS = [...PGlite.defaultStartParams, "-c", "shared_buffers=32MB", "-c", "TimeZone=UTC"];

async function openPglite(dataDir: string, snapshot?: Blob): Promise<Database> {
  const dir = dataDir.startsWith("memory://") ? dataDir : path.resolve(dataDir, "pglite");
  let unlock = () => {};
  if (!dir.startsWith("memory://")) {
    // the database holds people's addresses and sealed secrets: its folder is the owner's alone
    // (under the usual umask its files were readable by every local user: thirteenth review),
    // a folder made by an earlier version included
    unlock = writingDataFolder(dataDir, "or DATABASE_URL to use Postgres instead of the embedded database", () => {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      // only the owner may change a folder's mode: a folder another user made and let this one
      // write is used as it is (fourteenth review)
      if (statSync(dir).uid === process.getuid?.()) chmodSync(dir, 0o700);
      return lockPgliteFolder(dir);
    });
  }
  let pglite: PGlite;
  try {
    // a first start copies the empty cluster the install made instead of running initdb
    if (!snapshot && !dir.startsWith("memory://")) adoptPgliteSeed(dir);
    pglite = await PGlite.create({ dataDir: dir, startParams: PGLITE_START_PARAMS, ...(snapshot ? { loadDataDir: snapshot } : {}) });
  } catch (err) {
    unlock();
    throw err;
  }
  const adapterFactory = new PrismaPGlite(pglite);
  const prisma = new PrismaClient({ adapter: adapterFactory });
  return {
    prisma,
    kind: "pglite",
    driver: { kind: "pglite", pglite },
    adapterFactory: migratingWholeFiles(adapterFactory, pglite),
    async listen(channel, onNotify) {
      const unsub = await pglite.listen(channel, onNotify);
      return async () => unsub();
    },
    async close() {
      try {
        await prisma.$disconnect();
        await pglite.close();
      } finally {
        unlock();
      }
    },
  };
}

/**
 * The adapter the migrations run through on PGlite (docs/operations.md, "A migration that
 * failed"). pglite-prisma-adapter (0.7) starts a migration file's SQL without waiting for it:
 * Prisma's engine recorded a file that failed (a statement refused, a full disk) as applied, went
 * on with the next ones, and the process died of the unhandled error with a stack trace; the next
 * start found nothing to apply and served without that migration's tables or columns.
 *
 * Here a file runs to its end before the engine goes on, and its failure is the engine's, said in
 * one line. A file runs in one transaction with the mark that its migration finished (the row the
 * engine has just started), so a kill -9 leaves either both or neither: a migration recorded as
 * started and never finished did nothing, and the next start applies it again
 * (src/db/migrations.ts). A file that cannot run in a transaction (CREATE INDEX CONCURRENTLY, or
 * its own BEGIN and COMMIT) runs as it is; those of prisma/migrations can be run again.
 */
function migratingWholeFiles(factory: PrismaPGlite, pglite: PGlite): SqlMigrationAwareDriverAdapterFactory {
  return {
    provider: factory.provider,
    adapterName: factory.adapterName,
    connectToShadowDb: () => factory.connectToShadowDb(),
    async connect() {
      const adapter = await factory.connect();
      const converted = (err: unknown): never => (adapter as unknown as { onError(e: unknown): never }).onError(err);
      adapter.executeScript = async (script: string) => {
        try {
          if (OWN_TRANSACTION.test(script.replace(/--.*$/gm, ""))) await pglite.exec(script);
          else await pglite.transaction(async (tx) => void (await tx.exec(`${script}\n;${MIGRATION_FINISHED}`)));
        } catch (err) {
          converted(err);
        }
      };
      return adapter;
    },
  };
}

/** What a file cannot run in a transaction with (comments taken out first). */
const OWN_TRANSACTION = /\bCONCURRENTLY\b|^\s*(BEGIN|COMMIT|START\s+TRANSACTION)\s*;/im;

/** Marks the migration the engine is applying finished, in the transaction of its file (nothing before the first). */
const MIGRATION_FINISHED = `DO $lg$ BEGIN
  IF to_regclass('_prisma_migrations') IS NOT NULL THEN
    UPDATE _prisma_migrations SET finished_at = now()
    WHERE finished_at IS NULL AND rolled_back_at IS NULL
      AND started_at = (SELECT max(started_at) FROM _prisma_migrations WHERE rolled_back_at IS NULL);
  END IF;
END $lg$;`;
