-- Hand-written, and empty on purpose. It ships the triggers of src/rate-limit.sql that put the
-- counts of gateways of the build before the sliding counters into the quarters, a repeatable
-- file (src/db/repeatable.ts). A build that finds this migration unknown leaves the new
-- definitions alone while it restarts during the upgrade (docs/operations.md, "Functions and
-- triggers"). No table changes.
SELECT 1
