-- Hand-written: the schema of the dashboard's derived data was named "console", the dashboard's
-- old name (issue 25: one name for one thing). ALTER SCHEMA moves its tables, types and
-- functions with it and keeps their OIDs, so the triggers on deliveries and delivery_attempts
-- and the expression indexes of outbox_events follow them unchanged. The repeatable step that
-- runs right after the migrations re-creates the functions from src/delivery/dashboard-*.sql and
-- src/webhooks/event-accounts.sql, which name "dashboard".
--
-- One transaction, said explicitly: on Postgres, src/db/migrations.ts applies a file through the
-- pg driver adapter, which commits each statement on its own, and between the rename and the
-- last wrapper below the previous build's trigger functions would find no console.* to call.
BEGIN;

ALTER SCHEMA console RENAME TO dashboard;

-- Expand, then contract (docs/operations.md): "console" stays, for one release, as a compatibility
-- schema holding what the previous build names. Its processes keep running during a rolling
-- upgrade. The next release drops it (DROP SCHEMA console CASCADE) in a migration of its own,
-- when no process of this build's predecessor is left. Nothing of this build reads it.
--
-- What the previous build names, and why each object is here:
-- * Its code (src/delivery/charts.ts, src/console/users.ts at that build) reads
--   console.webhook_hours, console.project_hours and console.webhook_delivery_hours, and filters
--   outbox events on console.event_account(body) and console.event_secondary_account(body).
-- * Its trigger functions stay installed from this migration's commit until the repeatable step
--   commits the new ones, and a delivery recorded in between (by any process) runs them. Their
--   bodies say console.add_outcomes, console.outcome, console.add_delivery_states and
--   ::console.delivery_state_change, and the functions they call say console.webhook_hours,
--   console.latency_bucket, console.histogram and ::console.attempt_outcome. PL/pgSQL and SQL
--   function bodies resolve names when they are planned, and the rename invalidates every cached
--   plan, so each of those names must resolve here, writes included.
--
-- Views: simple views over one table, so Postgres writes through them (INSERT with ON CONFLICT,
-- UPDATE, DELETE, FOR UPDATE). Each also shows the table's xmax, which the old upserts return
-- (RETURNING xmax = 0 tells a new row from an updated one). A view column on a system column is
-- read-only, the others stay writable.
CREATE SCHEMA console;

CREATE VIEW console.webhook_hours AS
  SELECT webhook_id, project_id, hour, succeeded, retried, failed, latency, xmax FROM dashboard.webhook_hours;

CREATE VIEW console.project_hours AS
  SELECT project_id, hour, succeeded, retried, failed, latency, xmax FROM dashboard.project_hours;

CREATE VIEW console.webhook_delivery_hours AS
  SELECT webhook_id, hour, shard, pending, succeeded, failed, gone, last_ok, xmax FROM dashboard.webhook_delivery_hours;

-- The two row types, by their old names: a value cast to one is a value of the moved type.
CREATE DOMAIN console.attempt_outcome AS dashboard.attempt_outcome;

CREATE DOMAIN console.delivery_state_change AS dashboard.delivery_state_change;

-- Wrappers with the old signatures (the row types are the moved ones: a signature names a type
-- by OID). LANGUAGE sql, one SELECT, with the volatility of what they call and no SET or STRICT:
-- the planner inlines them, so console.event_account(body) in an old query becomes
-- dashboard.event_account(body), the expression outbox_events_account_idx is built on, and the
-- index still answers it (checked with EXPLAIN on Postgres 15 and PGlite).
CREATE FUNCTION console.event_account(body text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT dashboard.event_account(body) $$;

CREATE FUNCTION console.event_secondary_account(body text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT dashboard.event_secondary_account(body) $$;

CREATE FUNCTION console.latency_bucket(ms integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT dashboard.latency_bucket(ms) $$;

CREATE FUNCTION console.histogram(buckets integer[]) RETURNS integer[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT dashboard.histogram(buckets) $$;

CREATE FUNCTION console.outcome(
  project_id text, webhook_id text, delivery_status public.delivery_status, delivery_attempts integer,
  attempt integer, started_at timestamptz, status_code integer, duration_ms integer
) RETURNS dashboard.attempt_outcome
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT dashboard.outcome(project_id, webhook_id, delivery_status, delivery_attempts, attempt, started_at, status_code, duration_ms)
$$;

CREATE FUNCTION console.add_outcomes(batch dashboard.attempt_outcome[]) RETURNS void
LANGUAGE sql AS $$ SELECT dashboard.add_outcomes(batch) $$;

CREATE FUNCTION console.add_delivery_states(batch dashboard.delivery_state_change[]) RETURNS void
LANGUAGE sql AS $$ SELECT dashboard.add_delivery_states(batch) $$;

COMMIT;
