-- Repeatable migration (src/db/repeatable.ts): re-created whenever this file changes.
-- Functions here may change; tables change only in prisma/migrations.

-- One fan-out for every event (src/webhooks/outbox.ts enqueueAll, and link_enqueue inside
-- link_verify): it writes the events, one pending delivery per subscribed enabled webhook, and,
-- only when there is one and no worker is busy claiming, the NOTIFY the workers listen for. So
-- the rule "which webhooks get an event" is written once. One statement instead of INSERTs plus
-- fan-out plus notify: a link verify's two events took six round trips inside the business
-- transaction.
--
-- It counts nothing for the dashboard: a statement trigger on every INSERT into deliveries did,
-- and an enqueue took 3.63 ms and 560 µs of database CPU with it against 1.72 ms and 380 µs
-- without (bench/delivery-statements.ts, one event and one delivery per commit); the delivery
-- benchmark's open loop at 500 events/s committed only 421/s (migration
-- 20261123120000_enqueue_without_counters). Pending deliveries are counted when the stats are
-- read instead (src/delivery/dashboard-states.sql).
--
-- `p_only_webhooks[i]` limits event i to one webhook (a test event); NULL fans it out.
--
-- An event's created_at is when it was written (clock_timestamp()), not when its transaction
-- began (the column's default, now()): pulling events (src/webhooks/events-pull.ts) holds back
-- every event written after the oldest open transaction began, and an event's seq is taken as
-- it is written. Stamped with its transaction's start, an event written by a transaction that
-- began over a second before another one, but wrote after it, looked older than that one's
-- start: a pull while the other was still open returned it, and the reader's cursor moved past
-- the other's event (a lower seq, visible once it commits), which that reader never saw
-- (docs/webhooks.md, "Pulling events").
--
-- A delivery's created_at is its event's, the same timestamp(3) value, not the column's default
-- (its transaction's start, now()): a replay resets the failed deliveries "whose event happened
-- at or after since" (docs/webhooks.md, "Redelivery and replay") by the deliveries' created_at
-- (their webhook's index of them). Stamped with the transaction's start, a delivery looked older
-- than its event whenever the change had begun a millisecond or more before it wrote the event,
-- and a replay since that event's own createdAt (what the API shows) skipped it.
--
-- A delivery's id starts with the time it was made, like the events' and the attempts' ids
-- (src/ids.ts newOrderedId): `dlv_`, the milliseconds since the epoch in 12 hex digits, then the
-- last 20 hex digits of a version-4 UUID (78 random bits). New rows land at the right-hand end of
-- the primary key instead of on a random page of it.
CREATE OR REPLACE FUNCTION outbox_enqueue(
  p_channel text, p_ids text[], p_projects text[], p_types text[], p_bodies text[], p_tests boolean[], p_only_webhooks text[]
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_n integer;
BEGIN
  WITH ev AS (
    INSERT INTO outbox_events (id, project_id, event_type, body, test, created_at)
    SELECT *, clock_timestamp() AT TIME ZONE 'UTC' FROM unnest(p_ids, p_projects, p_types, p_bodies, p_tests)
    RETURNING id, project_id, event_type, created_at
  ), target AS (
    SELECT * FROM unnest(p_ids, p_only_webhooks) AS t(event_id, only_webhook)
  ), hooks AS (
    -- Key-share locked as they are read, as the deliveries' foreign key would lock them anyway:
    -- a webhook another transaction is deleting is waited for and then skipped. Read without the
    -- lock, it was found, and its delivery's foreign key check then failed once the deletion
    -- committed: the change that emitted the event (a sign-in, a link, a test event) answered a
    -- 500 because the project deleted a webhook at that moment. Only a deletion waits: updates of
    -- a webhook (enabling, its events, rotation) do not touch its key.
    SELECT w.id, w.project_id, w.events FROM webhooks w
    WHERE w.project_id = ANY (p_projects) AND w.enabled AND w.events && p_types
    FOR KEY SHARE
  ), dl AS (
    INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type, created_at)
    SELECT 'dlv_' || lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0')
             || right(replace(gen_random_uuid()::text, '-', ''), 20),
           ev.id, w.id, w.project_id, ev.event_type, ev.created_at
    FROM ev JOIN target t ON t.event_id = ev.id
    JOIN hooks w ON w.project_id = ev.project_id AND ev.event_type = ANY (w.events)
    WHERE t.only_webhook IS NULL OR w.id = t.only_webhook
    RETURNING 1
  )
  SELECT count(*) INTO v_n FROM dl;
  -- No NOTIFY while a worker has promised to claim again soon (src/delivery/claim-loop.ts): it
  -- will find these deliveries anyway, and notifying commits take turns (docs/operations.md,
  -- "Waking the workers").
  IF v_n > 0 AND NOT EXISTS (SELECT 1 FROM delivery_busy_workers WHERE until > now() AT TIME ZONE 'UTC') THEN
    PERFORM pg_notify(p_channel, '');
  END IF;
END
$$;
