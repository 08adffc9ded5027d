// A busy worker's promise to claim again soon (table delivery_busy_workers). While one holds, a
// commit that creates deliveries sends no NOTIFY (outbox_enqueue, src/webhooks/outbox.sql), and
// the worker finds those deliveries with its next claim instead. Postgres makes the commits of
// notifying transactions take turns: each holds a database-wide lock from just before its commit
// until its write-ahead log is flushed. Measured with pgbench on the benchmark machine (one-row
// inserts, 10 connections): 21,400 commits a second without NOTIFY, 5,700 with it; one
// connection 7,070 and 2,740 (docs/operations.md, "Waking the workers"; bench/RESULTS.md).
//
// Both statements commit without waiting for the disk: a promise lost with a database crash only
// means commits notify again, and one that outlives its worker runs out within a second.
import type { Database } from "../db/client.ts";
import { ASYNC_COMMIT, prepared, run } from "../db/fast.ts";

type DbLike = Pick<Database, "driver">;

/**
 * Also removes promises that ran out over a minute ago (workers that crashed), so the table every
 * commit reads stays a few rows long.
 */
const promiseSql = prepared<{ worker_id: string }>(
  "promise_busy",
  { worker_id: "text" },
  `WITH gone AS (
     DELETE FROM delivery_busy_workers WHERE until < (now() AT TIME ZONE 'UTC') - interval '1 minute' AND worker_id <> $1::text
   )
   INSERT INTO delivery_busy_workers AS b (worker_id, until)
   SELECT $1::text, (now() AT TIME ZONE 'UTC') + $2::int * interval '1 millisecond'
   WHERE ${ASYNC_COMMIT}
   ON CONFLICT (worker_id) DO UPDATE SET until = EXCLUDED.until
   RETURNING b.worker_id`,
);

const withdrawSql = prepared<{ worker_id: string }>(
  "withdraw_busy",
  { worker_id: "text" },
  `DELETE FROM delivery_busy_workers WHERE worker_id = $1::text AND ${ASYNC_COMMIT} RETURNING worker_id`,
);

/** `workerId` will claim again within `forMs`: commits need not notify until then. */
export async function promiseBusy(db: DbLike, workerId: string, forMs: number): Promise<void> {
  await run(db, promiseSql, [workerId, Math.round(forMs)]);
}

/** `workerId` is going to wait for a NOTIFY: from now on commits send one again (unless another worker is busy). */
export async function withdrawBusy(db: DbLike, workerId: string): Promise<void> {
  await run(db, withdrawSql, [workerId]);
}
