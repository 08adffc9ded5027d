-- Issue 26. A delivery worker busy claiming promises here to claim again before `until`, and
-- outbox_enqueue (src/webhooks/outbox.sql) sends no NOTIFY while such a promise holds. Postgres
-- makes the commits of notifying transactions take turns (a database-wide lock held from just
-- before the commit until its WAL is flushed), so a NOTIFY in every event-producing transaction
-- capped them for the whole database. Measured with pgbench on the benchmark machine, one-row
-- inserts, 10 connections, 21,400 commits a second without NOTIFY against 5,700 with it
-- (bench/RESULTS.md, delivery). It ships that change of the repeatable file src/webhooks/outbox.sql.
-- Only added. A previous build's workers write no promise, so commits notify as before until a
-- worker of this build is busy, and then that worker claims.
CREATE TABLE "delivery_busy_workers" (
    "worker_id" TEXT NOT NULL,
    "until" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "delivery_busy_workers_pkey" PRIMARY KEY ("worker_id")
);
