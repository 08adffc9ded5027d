-- Hand-written. Two things on the path from an event's commit to its first send.
--
-- 1. One fan-out for every event. `outbox_enqueue` writes events, one pending delivery per
--    subscribed enabled webhook and, only when there is one, the NOTIFY the workers listen for.
--    src/webhooks/outbox.ts (every domain change) calls it, and link_enqueue (inside
--    link_verify) is now a call to it, so the rule "which webhooks get an event" is written once.
--
-- 2. An enqueue no longer counts anything for the console. The webhook list's per-state counts
--    (console.webhook_delivery_hours, 20261123101400) were kept by a statement trigger on every
--    INSERT into deliveries: measured alone (bench/delivery-statements.ts, one event and one
--    delivery per commit) an enqueue took 3.63 ms and 560 µs of database CPU with it and 1.72 ms
--    and 380 µs without, and the delivery benchmark's open loop at 500 events/s could not commit
--    them all (421/s). Now:
--    * pending deliveries are counted when the stats are read, from the pending deliveries of
--      the window (deliveries_pending_created_idx, next migration): a delivery is pending for
--      seconds unless its receiver is failing, so that range is short,
--    * the table counts the finished states (succeeded, failed, gone) and last_ok, which change
--      only when the worker records a batch, a delivery is redelivered or replayed, a webhook is
--      disabled, or retention deletes: statements that already touch many rows,
--    * inserting a delivery that is not pending (linkgate never does, seeds and tests do)
--      is counted by a row trigger whose WHEN skips pending rows before any function runs.
--    Its `pending` column is no longer written (0 here). It stays for a build of the previous
--    release reading it during a rolling upgrade.
--
-- Deadlocks: the stale-row cleanup now skips rows another transaction is deleting
-- (SKIP LOCKED) instead of waiting on them in scan order, and a recount locks the shards it
-- rewrites in key order.
-- (Escape strings, semicolons written \x3B and quotes doubled: Prisma applies a migration to
-- Postgres by splitting it at every semicolon, quoted or not.)

CREATE OR REPLACE FUNCTION outbox_enqueue(
  p_channel text, p_ids text[], p_projects text[], p_types text[], p_bodies text[], p_tests boolean[], p_only_webhooks text[]
) RETURNS void
LANGUAGE plpgsql AS E'
DECLARE
  v_n integer\x3B
BEGIN
  WITH ev AS (
    INSERT INTO outbox_events (id, project_id, event_type, body, test)
    SELECT * FROM unnest(p_ids, p_projects, p_types, p_bodies, p_tests)
    RETURNING id, project_id, event_type
  ), target AS (
    SELECT * FROM unnest(p_ids, p_only_webhooks) AS t(event_id, only_webhook)
  ), dl AS (
    INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type)
    SELECT ''dlv_'' || replace(gen_random_uuid()::text, ''-'', ''''), ev.id, w.id, w.project_id, ev.event_type
    FROM ev JOIN target t ON t.event_id = ev.id
    JOIN webhooks w ON w.project_id = ev.project_id AND w.enabled AND ev.event_type = ANY (w.events)
    WHERE t.only_webhook IS NULL OR w.id = t.only_webhook
    RETURNING 1
  )
  SELECT count(*) INTO v_n FROM dl\x3B
  IF v_n > 0 THEN
    PERFORM pg_notify(p_channel, '''')\x3B
  END IF\x3B
END
';

CREATE OR REPLACE FUNCTION link_enqueue(p_project text, p_channel text, p_ids text[], p_types text[], p_bodies text[]) RETURNS void
LANGUAGE sql AS $$
  SELECT outbox_enqueue(p_channel, p_ids, array_fill(p_project, ARRAY[cardinality(p_ids)]), p_types, p_bodies,
                        array_fill(false, ARRAY[cardinality(p_ids)]), array_fill(NULL::text, ARRAY[cardinality(p_ids)]))
$$;

CREATE OR REPLACE FUNCTION console.add_delivery_states(batch console.delivery_state_change[]) RETURNS void
LANGUAGE plpgsql AS E'
DECLARE
  opened boolean\x3B
BEGIN
  WITH c AS (
    SELECT b.webhook_id, b.hour,
           coalesce(sum(b.delta) FILTER (WHERE b.status = ''succeeded''), 0)::integer AS succeeded,
           coalesce(sum(b.delta) FILTER (WHERE b.status = ''failed''), 0)::integer AS failed,
           coalesce(sum(b.delta) FILTER (WHERE b.status = ''gone''), 0)::integer AS gone,
           max(b.ok) AS ok
    FROM unnest(batch) AS b
    WHERE b.status <> ''pending''
      AND b.hour >= date_trunc(''hour'', now() - interval ''25 hours'')
      AND EXISTS (SELECT 1 FROM public.webhooks w WHERE w.id = b.webhook_id)
    GROUP BY b.webhook_id, b.hour
  ), added AS (
    INSERT INTO console.webhook_delivery_hours AS s (webhook_id, hour, shard, pending, succeeded, failed, gone, last_ok)
    SELECT webhook_id, hour, (pg_backend_pid() % 32)::smallint, 0, succeeded, failed, gone, ok FROM c
    ORDER BY webhook_id, hour
    ON CONFLICT (webhook_id, hour, shard) DO UPDATE
      SET succeeded = s.succeeded + excluded.succeeded,
          failed = s.failed + excluded.failed, gone = s.gone + excluded.gone,
          last_ok = greatest(s.last_ok, excluded.last_ok)
    RETURNING xmax = 0 AS opened
  )
  SELECT coalesce(bool_or(added.opened), false) INTO opened FROM added\x3B

  WITH r AS (
    SELECT DISTINCT b.webhook_id, b.hour FROM unnest(batch) AS b WHERE b.recount
  ), locked AS (
    SELECT s.webhook_id, s.hour, s.shard FROM console.webhook_delivery_hours s JOIN r USING (webhook_id, hour)
    ORDER BY s.webhook_id, s.hour, s.shard
    FOR UPDATE OF s
  )
  UPDATE console.webhook_delivery_hours s
  SET last_ok = (SELECT max(d.completed_at) FROM public.deliveries d
                 WHERE d.webhook_id = s.webhook_id AND d.created_at >= s.hour AND d.created_at < s.hour + interval ''1 hour''
                   AND d.status = ''succeeded'')
  FROM locked l
  WHERE s.webhook_id = l.webhook_id AND s.hour = l.hour AND s.shard = l.shard\x3B

  IF opened THEN
    DELETE FROM console.webhook_delivery_hours o
    WHERE (o.webhook_id, o.hour, o.shard) IN (
      SELECT webhook_id, hour, shard FROM console.webhook_delivery_hours
      WHERE hour < date_trunc(''hour'', now() - interval ''26 hours'')
      FOR UPDATE SKIP LOCKED)\x3B
  END IF\x3B
END
';

-- One delivery inserted in a finished state.
CREATE FUNCTION console.count_inserted_finished_delivery() RETURNS trigger
LANGUAGE plpgsql AS E'
BEGIN
  PERFORM console.add_delivery_states(ARRAY[ROW(NEW.webhook_id, date_trunc(''hour'', NEW.created_at), NEW.status, 1,
                                                CASE WHEN NEW.status = ''succeeded'' THEN NEW.completed_at END, false)::console.delivery_state_change])\x3B
  RETURN NULL\x3B
END';

DROP TRIGGER deliveries_console_states_insert ON public.deliveries;
DROP FUNCTION console.count_inserted_deliveries();

CREATE TRIGGER deliveries_console_states_insert_finished
AFTER INSERT ON public.deliveries
FOR EACH ROW WHEN (NEW.status <> 'pending')
EXECUTE FUNCTION console.count_inserted_finished_delivery();

UPDATE console.webhook_delivery_hours SET pending = 0 WHERE pending <> 0;
