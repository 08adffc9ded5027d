-- Hand-written, expand only. The retention sweep (src/retention/sweep.ts) removes settled notices
-- (sent or given up) after the events' retention, and read the whole table to find them. Pending
-- notices are few and have their own index (notices_due_idx), and this one holds the others by age.
-- CONCURRENTLY and alone in its file, as the previous migration.
CREATE INDEX CONCURRENTLY IF NOT EXISTS "notices_settled_created_idx" ON "notices" ("created_at") WHERE status <> 'pending'
