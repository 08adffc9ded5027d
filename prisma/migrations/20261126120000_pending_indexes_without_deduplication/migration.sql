-- Hand-written (issue 26). The two partial indexes of pending deliveries are read like a queue.
-- Every claim walks the head of each webhook's range in them, and rows leave them as fast as
-- they are delivered. A scan that finds an entry's row gone marks the entry dead, so the next
-- scan steps over it without visiting the table. But deduplication stores equal keys (every
-- delivery of one webhook enqueued in one transaction has the same created_at and the same
-- first next_attempt_at) as one posting list, and Postgres marks a posting list dead only once
-- all of its rows are gone. Until then every claim visited each gone row of it again.
-- Measured on the delivery benchmark (bench/RESULTS.md, delivery), 10,000 pending, 4 workers,
-- pg_stat_statements - claims touched 1,323 buffers each before, 664 after. Database CPU per
-- event over graphile-worker's in the same runs - 1 worker 2.48 and 2.62 before, 2.20 and 2.24
-- after, 4 workers 2.64 and 2.33 before, 2.34 and 2.18 after.
-- A storage setting for entries written from now on, no rewrite. Posting lists already in the
-- indexes stay until their rows are all gone (or REINDEX INDEX CONCURRENTLY rewrites them).
ALTER INDEX "deliveries_webhook_due_idx" SET (deduplicate_items = off);
ALTER INDEX "deliveries_pending_created_idx" SET (deduplicate_items = off);
