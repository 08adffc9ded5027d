-- Repeatable migration (src/db/repeatable.ts): re-created whenever this file changes.
--
-- The account an event is about, for the dashboard's users view: an account's recent events
-- (src/support/users.ts), read without scanning the outbox: data.user.user_id on every user.* event,
-- data.user_id on a security event that names one; and the secondary of a merge or unmerge
-- (whose user is the primary). Both are IMMUTABLE because the expression indexes
-- outbox_events_account_idx and outbox_events_secondary_account_idx (migration
-- 20261123091300_console_rollups) are built on them: a change to what they return must come
-- with a REINDEX of those two indexes in an ordinary migration, or the indexes keep the old
-- answers. Schema "dashboard" was named "console" before migration
-- 20261125170500_dashboard_schema (the wrappers it left under the old name went with
-- 20261126020000_drop_previous_build_compat).
--
-- Each body is one expression with no FROM, so Postgres inlines it where it is used, the two
-- indexes included: written with a FROM (to cast the body once), every insert into
-- outbox_events parsed and planned it again (perf in the link benchmark: 2 % of the backends'
-- CPU). coalesce casts the body a second time only for an event without data.user.
CREATE OR REPLACE FUNCTION dashboard.event_account(body text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(body::jsonb #>> '{data,user,user_id}', body::jsonb #>> '{data,user_id}')
$$;

CREATE OR REPLACE FUNCTION dashboard.event_secondary_account(body text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT body::jsonb #>> '{data,secondary_user_id}'
$$;
