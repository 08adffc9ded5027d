-- Issue 15, expand only: the retention sweep finds the oldest events by this index, so a run
-- with nothing to remove reads a few index pages instead of the whole table. CONCURRENTLY
-- because the table is large and in use: a plain CREATE INDEX blocks its writes for as long as
-- the build takes. CONCURRENTLY cannot run in a transaction block, and a file of several
-- statements is one, so it is alone in its migration (delivery_attempts has the next one).
CREATE INDEX CONCURRENTLY IF NOT EXISTS "outbox_events_created_at_idx" ON "outbox_events"("created_at")
