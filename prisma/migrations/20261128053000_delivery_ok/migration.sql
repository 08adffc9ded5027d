-- Hand-written, and empty on purpose. It ships the repeatable file
-- src/delivery/dashboard-rollups.sql with delivery_ok(status_code), the one SQL spelling of a
-- delivered attempt (200, 201 or 202), which dashboard.outcome and the disabling of dead webhooks
-- now call instead of each writing the list out. Postgres inlines it, so both compute what they
-- did. A build that finds this migration unknown leaves the new definitions alone while it
-- restarts during the upgrade (docs/operations.md, "Functions and triggers"). No table changes.
SELECT 1
