-- Hand-written, and empty on purpose. It ships repeatable files (src/db/repeatable.ts) that
-- changed with no table: the triggers of src/rate-limit.sql that put the counts of gateways of
-- the build before the sliding counters into the quarters, and the waits of a refused verify in
-- src/auth/sign-in.sql and src/linking/link-verify.sql, and the order in which a sign-in locks
-- an account and its merge partner (src/auth/sign-in.sql). A build that finds this migration unknown
-- leaves the new definitions alone while it restarts during the upgrade (docs/operations.md,
-- "Functions and triggers"). No table changes.
SELECT 1
