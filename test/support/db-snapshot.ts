// What "changes nothing" means for a rejected request: every row of every table, as a count and
// a hash per table, in one query; a table added later is covered without touching this file.
// Bookkeeping that a refused request may still move is left out on purpose: rate-limit
// counters (a refusal counts against a limit) and a session's last_used_at (touched, at most
// once a minute, whenever its token is presented).
import type { Database } from "../../src/db/client.ts";

const SKIPPED_TABLES = new Set(["_prisma_migrations", "rate_limits"]);
const SKIPPED_COLUMNS: Record<string, string[]> = { sessions: ["last_used_at"] };

export type DbSnapshot = Record<string, { rows: number; hash: string }>;

const queries = new WeakMap<object, Promise<string>>();

async function snapshotSql(db: Pick<Database, "prisma">): Promise<string> {
  const tables = await db.prisma.$queryRawUnsafe<{ name: string }[]>(
    `SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`,
  );
  return tables
    .map((t) => t.name)
    .filter((name) => !SKIPPED_TABLES.has(name))
    .map((name) => {
      const skipped = SKIPPED_COLUMNS[name] ?? [];
      const row = skipped.length ? `(to_jsonb(t) - ARRAY[${skipped.map((c) => `'${c}'`).join(", ")}])::text` : "to_jsonb(t)::text";
      return `SELECT '${name}' AS name, count(*)::int AS rows, md5(coalesce(string_agg(${row}, E'\\n' ORDER BY ${row}), '')) AS hash FROM "${name}" t`;
    })
    .join(" UNION ALL ");
}

/**
 * Where the write-ahead log ends. Every change to a row of a table moves it (none of these
 * tables is UNLOGGED), so while it stays put an earlier reading of the tables still holds.
 */
const WAL_END = "SELECT pg_current_wal_insert_lsn()::text AS lsn";

/**
 * `read`, answered from its last call on the same database while nothing was written since.
 * Hashing every table took 6 ms a call on Postgres and 10 ms on PGlite, 40 s of security.fuzz's
 * 75 s on a 2-core machine, and most refused requests write nothing at all.
 */
export function keptWhileUnwritten<T>(read: (db: Pick<Database, "prisma">) => Promise<T>): (db: Pick<Database, "prisma">) => Promise<T> {
  const last = new WeakMap<object, { lsn: string; value: T }>();
  return async (db) => {
    // read before the tables: a write meanwhile moves the end past this, and the next call reads again
    const [{ lsn }] = await db.prisma.$queryRawUnsafe<{ lsn: string }[]>(WAL_END);
    const kept = last.get(db.prisma);
    if (kept?.lsn === lsn) return kept.value;
    const value = await read(db);
    last.set(db.prisma, { lsn, value });
    return value;
  };
}

export const dbSnapshot = keptWhileUnwritten(async (db): Promise<DbSnapshot> => {
  let sql = queries.get(db.prisma);
  if (!sql) queries.set(db.prisma, (sql = snapshotSql(db)));
  const rows = await db.prisma.$queryRawUnsafe<{ name: string; rows: number; hash: string }[]>(await sql);
  return Object.fromEntries(rows.map((r) => [r.name, { rows: r.rows, hash: r.hash }]));
});
