-- Repeatable migration (src/db/repeatable.ts): re-created whenever this file changes.
-- The tables and types these functions write (schema "dashboard", named "console" before
-- migration 20261125170500_dashboard_schema: derived data only, every row follows from
-- delivery_attempts or deliveries and can be rebuilt) change only in prisma/migrations.
-- Triggers are CREATE OR REPLACE TRIGGER (Postgres 14+): unlike DROP and CREATE, it never takes
-- an ACCESS EXCLUSIVE lock on the table, so claims keep reading deliveries while it waits.

-- The webhook list's stats (src/delivery/charts.ts webhooksStats): each webhook's deliveries
-- created in the last 24 hours by state, without counting the window's deliveries at every
-- request (180 ms for 140,000 of them with 1,000,000 over 7 days). dashboard.webhook_delivery_hours
-- holds, per webhook, hour of creation and shard, how many of them are now succeeded, failed
-- and gone, and the latest completion of the succeeded ones (migrations
-- 20261123101400_console_delivery_states, 20261123120000_enqueue_without_counters).
--
-- Pending deliveries are not counted here: an enqueue would pay for it (see
-- src/webhooks/outbox.sql), so the stats count the window's pending deliveries when read
-- (deliveries_pending_created_idx). The `pending` column stays 0, for the build before
-- 20261123120000, which read it during a rolling upgrade.
--
-- A shard is the writer's backend pid modulo 32: with one row per (webhook, hour) every commit
-- of a webhook's deliveries queued on that row's lock (345 to 408 enqueues/s against 622/s
-- without, 40 concurrent enqueuers, 10 connections, one webhook).

-- Adds a batch of changes, rows in key order so concurrent batches never deadlock on them. A
-- webhook no longer there (its deliveries going with it) is skipped. A recount (a succeeded
-- delivery left its hour) locks the shards it rewrites in key order. A row opened for a new hour
-- drops the rows older than 26 hours, skipping rows another transaction is deleting instead of
-- waiting on them in scan order (a deadlock otherwise).
CREATE OR REPLACE FUNCTION dashboard.add_delivery_states(batch dashboard.delivery_state_change[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  opened boolean;
BEGIN
  WITH c AS (
    SELECT b.webhook_id, b.hour,
           coalesce(sum(b.delta) FILTER (WHERE b.status = 'succeeded'), 0)::integer AS succeeded,
           coalesce(sum(b.delta) FILTER (WHERE b.status = 'failed'), 0)::integer AS failed,
           coalesce(sum(b.delta) FILTER (WHERE b.status = 'gone'), 0)::integer AS gone,
           max(b.ok) AS ok
    FROM unnest(batch) AS b
    WHERE b.status <> 'pending'
      AND b.hour >= date_trunc('hour', now() - interval '25 hours')
      AND EXISTS (SELECT 1 FROM public.webhooks w WHERE w.id = b.webhook_id)
    GROUP BY b.webhook_id, b.hour
  ), added AS (
    INSERT INTO dashboard.webhook_delivery_hours AS s (webhook_id, hour, shard, pending, succeeded, failed, gone, last_ok)
    SELECT webhook_id, hour, (pg_backend_pid() % 32)::smallint, 0, succeeded, failed, gone, ok FROM c
    ORDER BY webhook_id, hour
    ON CONFLICT (webhook_id, hour, shard) DO UPDATE
      SET succeeded = s.succeeded + excluded.succeeded,
          failed = s.failed + excluded.failed, gone = s.gone + excluded.gone,
          last_ok = greatest(s.last_ok, excluded.last_ok)
    RETURNING xmax = 0 AS opened
  )
  SELECT coalesce(bool_or(added.opened), false) INTO opened FROM added;

  WITH r AS (
    SELECT DISTINCT b.webhook_id, b.hour FROM unnest(batch) AS b WHERE b.recount
  ), locked AS (
    SELECT s.webhook_id, s.hour, s.shard FROM dashboard.webhook_delivery_hours s JOIN r USING (webhook_id, hour)
    ORDER BY s.webhook_id, s.hour, s.shard
    FOR UPDATE OF s
  )
  UPDATE dashboard.webhook_delivery_hours s
  SET last_ok = (SELECT max(d.completed_at) FROM public.deliveries d
                 WHERE d.webhook_id = s.webhook_id AND d.created_at >= s.hour AND d.created_at < s.hour + interval '1 hour'
                   AND d.status = 'succeeded')
  FROM locked l
  WHERE s.webhook_id = l.webhook_id AND s.hour = l.hour AND s.shard = l.shard;

  IF opened THEN
    DELETE FROM dashboard.webhook_delivery_hours o
    WHERE (o.webhook_id, o.hour, o.shard) IN (
      SELECT webhook_id, hour, shard FROM dashboard.webhook_delivery_hours
      WHERE hour < date_trunc('hour', now() - interval '26 hours')
      FOR UPDATE SKIP LOCKED);
  END IF;
END
$$;

-- A delivery inserted in a finished state (linkgate never does; seeds and tests do). A row
-- trigger whose WHEN skips pending rows before any function runs, so an enqueue pays nothing.
CREATE OR REPLACE FUNCTION dashboard.count_inserted_finished_delivery() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM dashboard.add_delivery_states(ARRAY[ROW(NEW.webhook_id, date_trunc('hour', NEW.created_at), NEW.status, 1,
                                                CASE WHEN NEW.status = 'succeeded' THEN NEW.completed_at END, false)::dashboard.delivery_state_change]);
  RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER deliveries_dashboard_states_insert_finished
AFTER INSERT ON public.deliveries
FOR EACH ROW WHEN (NEW.status <> 'pending')
EXECUTE FUNCTION dashboard.count_inserted_finished_delivery();

-- An update changes the counts only when a delivery changes state (or a succeeded one its
-- completion). Claims, lease renewals and releases write only lease_until and leased_by, and
-- mark their transaction linkgate.lease_only (src/delivery/sql.ts): the trigger returns at once
-- for them. Joining their old and new rows to find nothing took 0.22 of 1.84 ms in a claim of 50
-- (EXPLAIN ANALYZE, 40,000 pending over 10 webhooks; migration
-- 20261123120200_lease_statements_skip_state_counts). A trigger with transition tables cannot
-- be limited to some columns: Postgres refuses UPDATE OF with REFERENCING. The worker's record
-- statement marks its transaction linkgate.staged: it stages its state changes itself
-- (dashboard.apply_staged, below), so the trigger returns at once for it too.
CREATE OR REPLACE FUNCTION dashboard.count_updated_deliveries() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('linkgate.lease_only', true) = 'on' OR current_setting('linkgate.staged', true) = 'on' THEN
    RETURN NULL;
  END IF;
  PERFORM dashboard.add_delivery_states(array_agg(c))
  FROM (
    SELECT o.id, o.webhook_id AS ow, o.created_at AS oc, o.status AS os, n.webhook_id AS nw, n.created_at AS nc, n.status AS ns, n.completed_at AS nok
    FROM old_rows o JOIN new_rows n ON n.id = o.id
    WHERE (o.status, o.webhook_id, o.created_at) IS DISTINCT FROM (n.status, n.webhook_id, n.created_at)
       OR (n.status = 'succeeded' AND o.completed_at IS DISTINCT FROM n.completed_at)
  ) m
  CROSS JOIN LATERAL (VALUES
    (ROW(m.ow, date_trunc('hour', m.oc), m.os, -1, NULL, m.os = 'succeeded')::dashboard.delivery_state_change),
    (ROW(m.nw, date_trunc('hour', m.nc), m.ns, 1, CASE WHEN m.ns = 'succeeded' THEN m.nok END, false)::dashboard.delivery_state_change)
  ) AS v(c)
  WHERE greatest(m.oc, m.nc) >= date_trunc('hour', now() - interval '25 hours')
  HAVING count(*) > 0;
  RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER deliveries_dashboard_states_update
AFTER UPDATE ON public.deliveries
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION dashboard.count_updated_deliveries();

-- Retention, a webhook deleted: whatever removes deliveries takes them out of the counts.
CREATE OR REPLACE FUNCTION dashboard.count_deleted_deliveries() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM dashboard.add_delivery_states(array_agg(ROW(o.webhook_id, date_trunc('hour', o.created_at), o.status, -1,
                                                    NULL, o.status = 'succeeded')::dashboard.delivery_state_change))
  FROM deleted o
  WHERE o.created_at >= date_trunc('hour', now() - interval '25 hours')
  HAVING count(*) > 0;
  RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER deliveries_dashboard_states_delete
AFTER DELETE ON public.deliveries
REFERENCING OLD TABLE AS deleted
FOR EACH STATEMENT EXECUTE FUNCTION dashboard.count_deleted_deliveries();

-- The delivery worker's record statement (src/delivery/sql.ts recordResults) stages its batch
-- in dashboard.staged_outcomes instead of letting the triggers above and
-- dashboard.count_logged_attempts add it, and marks its transaction linkgate.staged so that they
-- return at once. This adds up to 500 staged rows (of ~50 attempts each) in one go: the rollups'
-- upserts, most of what the triggers cost, are paid once per apply instead of once per record
-- statement. Measured (bench/delivery-statements.ts): record 72 to 85 µs of database CPU per
-- delivery with the triggers, 35 to 48 without them.
--
-- Called by every worker once a second while it records, and by the dashboard's reads first
-- (src/delivery/charts.ts), with p_wait: a reader waits for rows another apply holds and then
-- finds them applied, so what it reads includes every batch committed before it asked. Workers
-- skip such rows instead. Rows are taken in id order either way, so two applies never deadlock;
-- the upserts then lock the rollups' rows in key order, as the triggers do. Outcomes of a project
-- deleted meanwhile are dropped (its rollups went with it by cascade); those of a webhook deleted
-- meanwhile still count in its project's chart, which counts deleted webhooks' attempts
-- (docs/graphql.md, deliveryChart; dashboard.add_outcomes skips the webhook's own rows).
CREATE OR REPLACE FUNCTION dashboard.apply_staged(p_wait boolean) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_ids bigint[];
  v_outcomes dashboard.attempt_outcome[];
  v_states dashboard.delivery_state_change[];
BEGIN
  IF p_wait THEN
    SELECT array_agg(id) INTO v_ids FROM (SELECT id FROM dashboard.staged_outcomes ORDER BY id LIMIT 500 FOR UPDATE) s;
  ELSE
    SELECT array_agg(id) INTO v_ids FROM (SELECT id FROM dashboard.staged_outcomes ORDER BY id LIMIT 500 FOR UPDATE SKIP LOCKED) s;
  END IF;
  IF v_ids IS NULL THEN
    RETURN 0;
  END IF;
  WITH taken AS (
    DELETE FROM dashboard.staged_outcomes s WHERE s.id = ANY (v_ids) RETURNING s.outcomes, s.states
  )
  SELECT (SELECT array_agg(o) FROM taken t CROSS JOIN LATERAL unnest(t.outcomes) AS o
          WHERE EXISTS (SELECT 1 FROM public.projects p WHERE p.id = o.project_id)),
         (SELECT array_agg(c) FROM taken t CROSS JOIN LATERAL unnest(t.states) AS c)
  INTO v_outcomes, v_states;
  IF v_outcomes IS NOT NULL THEN
    PERFORM dashboard.add_outcomes(v_outcomes);
  END IF;
  IF v_states IS NOT NULL THEN
    PERFORM dashboard.add_delivery_states(v_states);
    -- each webhook's latest success, whatever hour its delivery was created in (the counts above
    -- keep 26 hours): a delivery created days ago, replayed, can succeed after every newer one
    -- (migration 20261130200000_webhook_last_success)
    INSERT INTO dashboard.webhook_last_success AS s (webhook_id, at)
    SELECT c.webhook_id, max(c.ok) FROM unnest(v_states) AS c
    WHERE c.ok IS NOT NULL AND EXISTS (SELECT 1 FROM public.webhooks w WHERE w.id = c.webhook_id)
    GROUP BY c.webhook_id
    ORDER BY c.webhook_id
    ON CONFLICT (webhook_id) DO UPDATE SET at = greatest(s.at, excluded.at);
  END IF;
  RETURN cardinality(v_ids);
END
$$;
