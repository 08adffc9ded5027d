-- Hand-written, and empty on purpose. It ships the repeatable file src/linking/link-verify.sql,
-- whose link_verify now locks and reads the current account with the project in the WHERE
-- instead of comparing the project after reading it: another project's account is not found,
-- the same 'gone' answer as before. A build that finds this migration unknown leaves the new
-- definitions alone while it restarts during the upgrade (docs/operations.md, "Functions and
-- triggers"). No table changes.
SELECT 1
