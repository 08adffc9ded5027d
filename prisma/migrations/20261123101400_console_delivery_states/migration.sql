-- Hand-written: the webhook list's stats (src/delivery/log.ts webhooksStats), each webhook's
-- deliveries created in the last 24 hours by state, without counting the window's deliveries at
-- every request (180 ms for 140,000 of them with 1,000,000 over 7 days).
--
-- Per webhook and hour (UTC) of creation: how many of the deliveries created in it are now
-- pending, succeeded, failed and gone, and the latest completion of the succeeded ones. Statement
-- triggers on deliveries keep it, whatever statement changes a delivery (the worker's record,
-- a redelivery, a replay, a webhook disabled, a retention sweep, a webhook deleted). Only the
-- hours of the last 25 are kept and written: the stats read the whole hours of the window here
-- and the part of the oldest hour from deliveries.
--
-- Each (webhook, hour) is split into shards, one per database connection (its backend pid modulo
-- 32), and the stats add the shards up. Every transaction that writes an event inserts
-- deliveries, so with one row per (webhook, hour) every event commit of a webhook queued on that
-- row's lock until the one before it committed: 345 to 408 enqueues/s against 622/s with the
-- trigger off (40 concurrent enqueuers, 10 connections, one webhook), and the delivery
-- benchmark's 500 events/s open loop could not commit. A connection runs one transaction at a
-- time, so with a shard per connection only two connections whose pids share a shard ever wait.
CREATE TABLE console.webhook_delivery_hours (
  webhook_id text NOT NULL REFERENCES public.webhooks (id) ON DELETE CASCADE,
  hour timestamptz NOT NULL,
  shard smallint NOT NULL DEFAULT 0,
  pending integer NOT NULL,
  succeeded integer NOT NULL,
  failed integer NOT NULL,
  gone integer NOT NULL,
  last_ok timestamptz,
  PRIMARY KEY (webhook_id, hour, shard)
);

-- One delivery entering (+1) or leaving (-1) a count. `ok` is the completion time of one entering
-- as succeeded. `recount` marks a succeeded one leaving: its hour's last_ok is read again.
CREATE TYPE console.delivery_state_change AS (
  webhook_id text, hour timestamptz, status public.delivery_status, delta integer, ok timestamptz, recount boolean
);

-- Adds a batch of changes, rows in key order so concurrent batches never deadlock on them. A
-- webhook no longer there (its deliveries going with it) is skipped. A row opened for a new hour
-- drops the rows older than 26 hours.
-- (Escape strings, semicolons written \x3B and quotes doubled: Prisma applies a migration to
-- Postgres by splitting it at every semicolon, quoted or not.)
CREATE FUNCTION console.add_delivery_states(batch console.delivery_state_change[]) RETURNS void
LANGUAGE plpgsql AS E'
DECLARE
  opened boolean\x3B
BEGIN
  WITH c AS (
    SELECT b.webhook_id, b.hour,
           coalesce(sum(b.delta) FILTER (WHERE b.status = ''pending''), 0)::integer AS pending,
           coalesce(sum(b.delta) FILTER (WHERE b.status = ''succeeded''), 0)::integer AS succeeded,
           coalesce(sum(b.delta) FILTER (WHERE b.status = ''failed''), 0)::integer AS failed,
           coalesce(sum(b.delta) FILTER (WHERE b.status = ''gone''), 0)::integer AS gone,
           max(b.ok) AS ok
    FROM unnest(batch) AS b
    WHERE b.hour >= date_trunc(''hour'', now() - interval ''25 hours'')
      AND EXISTS (SELECT 1 FROM public.webhooks w WHERE w.id = b.webhook_id)
    GROUP BY b.webhook_id, b.hour
  ), added AS (
    INSERT INTO console.webhook_delivery_hours AS s (webhook_id, hour, shard, pending, succeeded, failed, gone, last_ok)
    SELECT webhook_id, hour, (pg_backend_pid() % 32)::smallint, pending, succeeded, failed, gone, ok FROM c
    ORDER BY webhook_id, hour
    ON CONFLICT (webhook_id, hour, shard) DO UPDATE
      SET pending = s.pending + excluded.pending, succeeded = s.succeeded + excluded.succeeded,
          failed = s.failed + excluded.failed, gone = s.gone + excluded.gone,
          last_ok = greatest(s.last_ok, excluded.last_ok)
    RETURNING xmax = 0 AS opened
  )
  SELECT coalesce(bool_or(added.opened), false) INTO opened FROM added\x3B

  UPDATE console.webhook_delivery_hours s
  SET last_ok = (SELECT max(d.completed_at) FROM public.deliveries d
                 WHERE d.webhook_id = s.webhook_id AND d.created_at >= s.hour AND d.created_at < s.hour + interval ''1 hour''
                   AND d.status = ''succeeded'')
  FROM (SELECT DISTINCT b.webhook_id, b.hour FROM unnest(batch) AS b WHERE b.recount) r
  WHERE s.webhook_id = r.webhook_id AND s.hour = r.hour\x3B

  IF opened THEN
    DELETE FROM console.webhook_delivery_hours WHERE hour < date_trunc(''hour'', now() - interval ''26 hours'')\x3B
  END IF\x3B
END
';

CREATE FUNCTION console.count_inserted_deliveries() RETURNS trigger
LANGUAGE plpgsql AS E'
BEGIN
  PERFORM console.add_delivery_states(array_agg(ROW(n.webhook_id, date_trunc(''hour'', n.created_at), n.status, 1,
                                                    CASE WHEN n.status = ''succeeded'' THEN n.completed_at END, false)::console.delivery_state_change))
  FROM inserted n
  WHERE n.created_at >= date_trunc(''hour'', now() - interval ''25 hours'')
  HAVING count(*) > 0\x3B
  RETURN NULL\x3B
END';

CREATE FUNCTION console.count_deleted_deliveries() RETURNS trigger
LANGUAGE plpgsql AS E'
BEGIN
  PERFORM console.add_delivery_states(array_agg(ROW(o.webhook_id, date_trunc(''hour'', o.created_at), o.status, -1,
                                                    NULL, o.status = ''succeeded'')::console.delivery_state_change))
  FROM deleted o
  WHERE o.created_at >= date_trunc(''hour'', now() - interval ''25 hours'')
  HAVING count(*) > 0\x3B
  RETURN NULL\x3B
END';

-- An update changes the counts only when a delivery changes state (or a succeeded one its
-- completion): a claim, which writes only the lease, finds nothing to add.
CREATE FUNCTION console.count_updated_deliveries() RETURNS trigger
LANGUAGE plpgsql AS E'
BEGIN
  PERFORM console.add_delivery_states(array_agg(c))
  FROM (
    SELECT o.id, o.webhook_id AS ow, o.created_at AS oc, o.status AS os, n.webhook_id AS nw, n.created_at AS nc, n.status AS ns, n.completed_at AS nok
    FROM old_rows o JOIN new_rows n ON n.id = o.id
    WHERE (o.status, o.webhook_id, o.created_at) IS DISTINCT FROM (n.status, n.webhook_id, n.created_at)
       OR (n.status = ''succeeded'' AND o.completed_at IS DISTINCT FROM n.completed_at)
  ) m
  CROSS JOIN LATERAL (VALUES
    (ROW(m.ow, date_trunc(''hour'', m.oc), m.os, -1, NULL, m.os = ''succeeded'')::console.delivery_state_change),
    (ROW(m.nw, date_trunc(''hour'', m.nc), m.ns, 1, CASE WHEN m.ns = ''succeeded'' THEN m.nok END, false)::console.delivery_state_change)
  ) AS v(c)
  WHERE greatest(m.oc, m.nc) >= date_trunc(''hour'', now() - interval ''25 hours'')
  HAVING count(*) > 0\x3B
  RETURN NULL\x3B
END';

CREATE TRIGGER deliveries_console_states_insert
AFTER INSERT ON public.deliveries
REFERENCING NEW TABLE AS inserted
FOR EACH STATEMENT EXECUTE FUNCTION console.count_inserted_deliveries();

CREATE TRIGGER deliveries_console_states_update
AFTER UPDATE ON public.deliveries
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION console.count_updated_deliveries();

CREATE TRIGGER deliveries_console_states_delete
AFTER DELETE ON public.deliveries
REFERENCING OLD TABLE AS deleted
FOR EACH STATEMENT EXECUTE FUNCTION console.count_deleted_deliveries();

-- The last 25 hours of deliveries already there.
INSERT INTO console.webhook_delivery_hours (webhook_id, hour, pending, succeeded, failed, gone, last_ok)
SELECT webhook_id, date_trunc('hour', created_at),
       count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'succeeded'),
       count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'gone'),
       max(completed_at) FILTER (WHERE status = 'succeeded')
FROM public.deliveries
WHERE created_at >= date_trunc('hour', now() - interval '25 hours')
GROUP BY webhook_id, date_trunc('hour', created_at);
