// How much of a table a call read, from the table's statistics of the transaction the call runs
// in: a test of "reads only what it needs" that does not depend on time. The backend's counts
// not yet flushed to the shared statistics (earlier transactions' may still be in them) are read
// before and after the call, and the difference is the call's.
import type { Prisma } from "../../src/generated/prisma/client.ts";
import type { Database } from "../../src/db/client.ts";

export type TableReads = { seq_scan: number; rows_read: number };

/** `call`'s result and what it read of `table` (sequential scans, and rows read by any scan), in one transaction. */
export async function withTableReads<T>(db: Pick<Database, "prisma">, table: string, call: (tx: Prisma.TransactionClient) => Promise<T>): Promise<{ result: T; reads: TableReads }> {
  return db.prisma.$transaction(async (tx) => {
    const counts = async () =>
      (
        await tx.$queryRaw<TableReads[]>`
          SELECT coalesce(seq_scan, 0)::int AS seq_scan, (coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::int AS rows_read
          FROM pg_stat_xact_user_tables WHERE relname = ${table}`
      )[0];
    const before = await counts();
    const result = await call(tx);
    const after = await counts();
    return { result, reads: { seq_scan: after.seq_scan - before.seq_scan, rows_read: after.rows_read - before.rows_read } };
  });
}
