// Which migrations a database has applied, read from Prisma's `_prisma_migrations`: the one
// question startup (src/db/migrations.ts), the repeatable step (src/db/repeatable.ts), /readyz
// and the CLI all ask, answered once. A module of its own below both migration steps, so
// neither imports the other for it.
import type { SqlQueryable } from "@prisma/driver-adapter-utils";
import { Prisma } from "../generated/prisma/client.ts";
import type { Db } from "./client.ts";

/**
 * What reads `_prisma_migrations`: a driver adapter or transaction of Prisma's (startup, the
 * repeatable step, under its lock) or a Prisma client (/readyz, the CLI).
 */
export type MigrationsReader = Pick<SqlQueryable, "queryRaw"> | Pick<Db, "$queryRaw">;

async function rows(q: MigrationsReader, sql: string): Promise<unknown[][]> {
  if ("queryRaw" in q) return (await q.queryRaw({ sql, args: [], argTypes: [] })).rows;
  return (await q.$queryRaw<Record<string, unknown>[]>(Prisma.raw(sql))).map((r) => Object.values(r));
}

/** The migrations the database records as applied: finished and not rolled back. None before the first. */
async function appliedMigrations(q: MigrationsReader): Promise<Set<string>> {
  const [[exists]] = await rows(q, "SELECT to_regclass('_prisma_migrations') IS NOT NULL");
  if (!exists) return new Set();
  const applied = await rows(q, "SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL");
  return new Set(applied.map(([name]) => String(name)));
}

/**
 * The migrations of `known` (this build's) that the database has not applied, in order. The one
 * rule for "migrated": startup applies migrations when it finds any, /readyz answers 503 and the
 * CLI refuses to work while there are some. Migrations of a newer build do not count either way,
 * so the previous build stays ready during an upgrade (docs/operations.md).
 */
export async function pendingMigrations(q: MigrationsReader, known: string[]): Promise<string[]> {
  const applied = await appliedMigrations(q);
  return known.filter((name) => !applied.has(name));
}

/**
 * Applied migrations that `known` lacks: a newer build has migrated this database, and the
 * repeatable step of this one must leave its definitions alone (src/db/repeatable.ts).
 */
export async function unknownMigrations(q: MigrationsReader, known: string[]): Promise<string[]> {
  const mine = new Set(known);
  return [...(await appliedMigrations(q))].filter((name) => !mine.has(name));
}
