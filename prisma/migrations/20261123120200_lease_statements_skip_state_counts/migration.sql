-- Hand-written. The console's per-state counts (console.webhook_delivery_hours) are kept by a
-- statement trigger on UPDATE of deliveries, which ran for every claim, lease renewal and lease
-- release too: statements that write only lease_until and leased_by, so the trigger joined
-- their old and new rows to find nothing to count. In a claim of 50 (EXPLAIN ANALYZE, 40,000
-- pending over 10 webhooks) it took 0.22 of 1.84 ms. Those statements (src/delivery/sql.ts)
-- now mark their transaction with linkgate.lease_only, and the trigger returns at once for
-- it. (A trigger with transition tables cannot be limited to some columns: Postgres refuses
-- UPDATE OF with REFERENCING.)
-- (Escape string, semicolons written \x3B and quotes doubled: Prisma applies a migration to
-- Postgres by splitting it at every semicolon, quoted or not.)
CREATE OR REPLACE FUNCTION console.count_updated_deliveries() RETURNS trigger
LANGUAGE plpgsql AS E'
BEGIN
  IF current_setting(''linkgate.lease_only'', true) = ''on'' THEN
    RETURN NULL\x3B
  END IF\x3B
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
END'
