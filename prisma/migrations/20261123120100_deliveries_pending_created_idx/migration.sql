-- Hand-written. The webhook list's pending counts (src/delivery/charts.ts webhooksStats) are read
-- from this index: a webhook's pending deliveries created in the last 24 hours are one range of
-- it, counted without visiting the table once vacuum has seen the pages. Pending deliveries leave
-- it when they finish, so it holds what is in flight or waiting for a retry, not the log.
-- Built CONCURRENTLY (in a migration of its own: Postgres cannot build an index concurrently in a
-- transaction or next to other statements), so deliveries keep being written while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS "deliveries_pending_created_idx" ON "deliveries" ("webhook_id", "created_at") WHERE status = 'pending'
