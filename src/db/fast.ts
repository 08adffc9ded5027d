// The fast path for hot statements: SQL that runs per delivery goes straight to the driver
// under Prisma's adapter (the same pg Pool, or the same PGlite instance), not through Prisma's
// raw-query path. Prisma stays the schema, the migrations and the query layer everywhere else.
//
// Why: measured in a claim/record loop (bench/delivery-statements.ts), Prisma's $queryRaw cost
// 25–35 µs of Node CPU per delivery for the two statements of the delivery engine, several
// times what the driver itself needs for the same SQL and rows.
//
// Rows are typed by hand next to each statement; test/delivery.sql-types.test.ts runs every
// statement of the registry below on a migrated database and checks the columns it returns
// (names and Postgres types) against those row types.
import { createHash } from "node:crypto";
import type { Database } from "./client.ts";
import { Prisma } from "../generated/prisma/client.ts";

/**
 * `text` with its "\0" holes filled by values (or SQL fragments), as a Prisma fragment: an SQL
 * condition written once with its arguments as holes serves a prepared statement here ($1…) and
 * a Prisma query alike.
 */
export function withHoles(text: string, ...values: unknown[]): Prisma.Sql {
  return Prisma.sql(text.split("\0"), ...(values as Prisma.Sql[]));
}

/** One statement: its SQL, a name unique to that text, and (for the type checker) its row type. */
export type Prepared<Row> = {
  readonly label: string;
  readonly name: string;
  readonly text: string;
  /** The columns each row carries and their Postgres types, as checked by the test. */
  readonly columns: Readonly<Record<keyof Row & string, PgType>>;
};

/**
 * The Postgres types the hand-written row types may use: both drivers parse text to string,
 * int4 and float8 to number, bool to boolean, timestamptz to Date. (No int8: pg gives a
 * string, PGlite a number. Times go out as float8 ms where a Date is not needed, which spares
 * pg's date parser on every row.)
 */
export type PgType = "text" | "int4" | "float8" | "bool" | "timestamptz";

const registry: Prepared<unknown>[] = [];

/**
 * Declares a statement. On Postgres it runs as a named prepared statement (parsed and planned
 * once per connection; the name carries a hash of the text, so a changed statement never meets
 * a stale one). PGlite has no named statements through its API; it parses each time.
 */
export function prepared<Row>(label: string, columns: Prepared<Row>["columns"], text: string): Prepared<Row> {
  const st: Prepared<Row> = { label, name: `lg_${label}_${createHash("sha256").update(text).digest("hex").slice(0, 12)}`, text, columns };
  registry.push(st as Prepared<unknown>);
  return st;
}

/** Every statement declared so far (for the schema test). */
export function preparedStatements(): readonly Prepared<unknown>[] {
  return registry;
}

/**
 * A condition that is always true and lets the statement's transaction commit without waiting for
 * its write-ahead log to reach the disk (`synchronous_commit` off for that transaction only): for
 * writes a database crash may lose without harm, such as leases, counters and a worker's promise.
 */
export const ASYNC_COMMIT = "set_config('synchronous_commit', 'off', true) IS NOT NULL";

/** Runs a statement on the database's own driver; values are positional ($1, $2, …). */
export async function run<Row>(db: Pick<Database, "driver">, st: Prepared<Row>, values: unknown[]): Promise<Row[]> {
  const d = db.driver;
  if (d.kind === "postgres") return (await d.pool.query({ name: st.name, text: st.text, values })).rows as Row[];
  return (await d.pglite.query<Row>(st.text, values)).rows;
}
