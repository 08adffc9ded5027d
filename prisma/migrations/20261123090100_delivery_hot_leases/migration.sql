-- Delivery attempts store which secrets signed the request instead of the ~700 bytes of headers
-- (src/delivery/log.ts rebuilds them for display). Expand only: request_headers stays, readable,
-- for the attempts logged before, and new attempts leave it null.
ALTER TABLE "delivery_attempts" ADD COLUMN     "signed_with" TEXT,
ALTER COLUMN "request_headers" DROP NOT NULL;

-- Hand-written from here: index and storage changes the Prisma schema language cannot say.
-- A lease (lease_until, leased_by) is now read at the head of each webhook's due range instead of
-- from an index of its own (src/delivery/sql.ts). With no index on those columns, a claim, a
-- renewal and a release are HOT updates: a new row version on the same page, no index entries.
DROP INDEX IF EXISTS "deliveries_leased_idx";

-- Room on every page for those row versions (new pages only: existing ones fill as they are
-- rewritten), so that a HOT update finds space next to the row it replaces.
ALTER TABLE "deliveries" SET (fillfactor = 80);
