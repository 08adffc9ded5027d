-- Issue 15, expand only: the retention sweep finds the oldest attempts by this index (see the
-- previous migration for why CONCURRENTLY, and alone in its file).
CREATE INDEX CONCURRENTLY IF NOT EXISTS "delivery_attempts_started_at_idx" ON "delivery_attempts"("started_at")
