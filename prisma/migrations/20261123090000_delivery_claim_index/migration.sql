-- Hand-written: partial indexes, which the Prisma schema language cannot say.
-- The delivery claim reads each webhook's due deliveries oldest first, a few rows per webhook,
-- so its cost does not grow with the backlog (see claimDue in src/delivery/sql.ts).
CREATE INDEX "deliveries_webhook_due_idx" ON "deliveries" ("webhook_id", "next_attempt_at") WHERE status = 'pending';

-- Live leases per webhook (the per-webhook cap), without walking that webhook's scheduled retries.
-- Only leased rows are in it, so it stays as small as the number of deliveries in flight.
CREATE INDEX "deliveries_leased_idx" ON "deliveries" ("webhook_id", "lease_until") WHERE status = 'pending' AND lease_until IS NOT NULL;

-- The global due-order index of the first migration is read by nothing any more, and every
-- claim, renewal and retry had to update it.
DROP INDEX IF EXISTS "deliveries_due_idx";
