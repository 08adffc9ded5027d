-- Hand-written, and empty on purpose. It ships src/auth/sign-in.sql (sign_in_capped and
-- sign_in_verify, the verify of an OTP sign-in in one statement), a repeatable file
-- (src/db/repeatable.ts). A build that finds this migration unknown leaves the new
-- definitions alone while it restarts during the upgrade (docs/operations.md, "Functions and
-- triggers"). No table changes, and the build before this one never calls these functions.
SELECT 1
