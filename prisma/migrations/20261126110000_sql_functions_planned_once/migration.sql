-- Hand-written, and empty on purpose. It ships the repeatable files src/linking/link-verify.sql
-- (link_enqueue and link_text_array in PL/pgSQL, planned once per connection),
-- src/auth/sign-in.sql (sign_in_capped likewise) and src/webhooks/event-accounts.sql
-- (dashboard.event_account in a form Postgres inlines, with the same answers, so its index keeps
-- its entries). A build that finds this migration unknown leaves the new definitions alone while
-- it restarts during the upgrade (docs/operations.md, "Functions and triggers"). No table changes.
SELECT 1
