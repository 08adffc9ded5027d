-- Ships src/auth/proofs.sql (the function proven_through_secondary, what an unmerge gives back),
-- which the repeatable step creates after this migration. No table changes: a build knows
-- another apart by its ordinary migrations, and one that finds a migration it does not know
-- leaves the repeatable files alone (docs/operations.md, "Expand, then contract")
SELECT 1
