-- Repeatable migration (src/db/repeatable.ts): re-created whenever this file changes.
-- The tables and types these functions write (schema "dashboard", named "console" before
-- migration 20261125170500_dashboard_schema: derived data only, every row follows from
-- delivery_attempts or deliveries and can be rebuilt) change only in prisma/migrations.
-- Triggers are CREATE OR REPLACE TRIGGER (Postgres 14+): unlike DROP and CREATE, it never takes
-- an ACCESS EXCLUSIVE lock on the table, so claims keep reading deliveries while it waits.

-- The dashboard's charts (src/delivery/charts.ts reads them): per webhook and per
-- project and hour (UTC), the attempts started in it that succeeded (200/201/202), were retried
-- (failed, another attempt scheduled) or failed (failed, and the delivery gave up: schedule used
-- up, or 410), and the latency histogram of the successful ones, so a chart answers in
-- milliseconds whatever the size of the delivery log (migration 20261123091300_console_rollups).

-- Latency as 128 buckets: bucket 0 holds 0 ms, bucket k >= 1 holds [2^((k-1)/8), 2^(k/8)) ms
-- (each 9 % wider than the last), bucket 127 everything from 55 s. Histograms add up, so the
-- p50 and p95 of any interval or project come from summing hours, within one bucket's width.
CREATE OR REPLACE FUNCTION dashboard.latency_bucket(ms integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN ms IS NULL OR ms <= 0 THEN 0 ELSE least(127, 1 + floor(8 * ln(ms::float8) / ln(2::float8))::integer) END
$$;

-- The histogram (128 counts) of a list of bucket numbers, counted into an array in one pass:
-- the first form joined 128 buckets with the batch and sorted them, most of the ~2 ms the
-- rollups added to each batch of 50 attempts (scripts/measure-charts.ts, migration
-- 20261123091400_console_rollups_cached_plans).
CREATE OR REPLACE FUNCTION dashboard.histogram(buckets integer[]) RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  h integer[] := array_fill(0, ARRAY[128]);
  b integer;
BEGIN
  FOREACH b IN ARRAY coalesce(buckets, '{}') LOOP
    h[b + 1] := h[b + 1] + 1;
  END LOOP;
  RETURN h;
END
$$;

-- Delivered: the receiver answered 200, 201 or 202 (docs/webhooks.md, "Answers, retries and the
-- schedule"); any other status, or none (NULL), is not. SQL's one spelling of SUCCESS_STATUSES
-- (src/delivery/schedule.ts, what the worker decides with; test/delivery.sql.test.ts checks the
-- two agree), called here and by src/delivery/dead-webhooks.ts. A function rather than the TS
-- constant interpolated: this file is SQL only, and a scalar LANGUAGE sql function of one
-- expression with no FROM is inlined by Postgres (src/db/repeatable.ts), so dashboard.outcome and
-- the statements calling it run the very expression they ran when it was written out.
CREATE OR REPLACE FUNCTION public.delivery_ok(status_code integer) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(status_code IN (200, 201, 202), false)
$$;

-- One logged attempt as the tables count it, with its delivery as the statement that logged it
-- left it: a failed attempt gave up when the receiver answered 410, or when its delivery is now
-- failed or gone at that very attempt number.
CREATE OR REPLACE FUNCTION dashboard.outcome(
  project_id text, webhook_id text, delivery_status public.delivery_status, delivery_attempts integer,
  attempt integer, started_at timestamptz, status_code integer, duration_ms integer
) RETURNS dashboard.attempt_outcome
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT ROW(project_id, webhook_id, started_at, public.delivery_ok(status_code),
             NOT public.delivery_ok(status_code)
               AND (status_code IS NOT DISTINCT FROM 410 OR (delivery_attempts = attempt AND delivery_status IN ('failed', 'gone'))),
             duration_ms)::dashboard.attempt_outcome
$$;

-- Adds a batch of outcomes to both tables. Rows are upserted in key order, so concurrent batches
-- never deadlock on them. An outcome of a webhook deleted meanwhile (dashboard.apply_staged adds
-- what the worker staged before the deletion) is added to its project's hours only: the project's
-- chart counts deleted webhooks' attempts too (docs/graphql.md, deliveryChart), and the webhook's
-- rows went with it. A row opened for a new hour drops the rows of its key older than
-- 8 days: nothing reads them, and each webhook stays at ~200 rows with no sweeper. PL/pgSQL,
-- so its statement is planned once per connection (an SQL function is planned at every call).
CREATE OR REPLACE FUNCTION dashboard.add_outcomes(batch dashboard.attempt_outcome[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  WITH a AS (
    SELECT project_id, webhook_id, date_trunc('hour', started_at) AS hour, ok, gave_up, dashboard.latency_bucket(duration_ms) AS bucket
    FROM unnest(batch)
  ), hooks AS (
    INSERT INTO dashboard.webhook_hours AS s (webhook_id, project_id, hour, succeeded, retried, failed, latency)
    SELECT webhook_id, project_id, hour,
           count(*) FILTER (WHERE ok), count(*) FILTER (WHERE NOT ok AND NOT gave_up), count(*) FILTER (WHERE gave_up),
           dashboard.histogram(array_agg(bucket) FILTER (WHERE ok))
    FROM a WHERE EXISTS (SELECT 1 FROM public.webhooks w WHERE w.id = a.webhook_id)
    GROUP BY webhook_id, project_id, hour
    ORDER BY webhook_id, hour
    ON CONFLICT (webhook_id, hour) DO UPDATE
      SET succeeded = s.succeeded + excluded.succeeded, retried = s.retried + excluded.retried, failed = s.failed + excluded.failed,
          latency = ARRAY(SELECT x + y FROM unnest(s.latency, excluded.latency) WITH ORDINALITY AS u(x, y, k) ORDER BY k)
    RETURNING webhook_id, hour, xmax = 0 AS opened
  ), projects AS (
    INSERT INTO dashboard.project_hours AS s (project_id, hour, succeeded, retried, failed, latency)
    SELECT project_id, hour,
           count(*) FILTER (WHERE ok), count(*) FILTER (WHERE NOT ok AND NOT gave_up), count(*) FILTER (WHERE gave_up),
           dashboard.histogram(array_agg(bucket) FILTER (WHERE ok))
    FROM a GROUP BY project_id, hour
    ORDER BY project_id, hour
    ON CONFLICT (project_id, hour) DO UPDATE
      SET succeeded = s.succeeded + excluded.succeeded, retried = s.retried + excluded.retried, failed = s.failed + excluded.failed,
          latency = ARRAY(SELECT x + y FROM unnest(s.latency, excluded.latency) WITH ORDINALITY AS u(x, y, k) ORDER BY k)
    RETURNING project_id, hour, xmax = 0 AS opened
  ), old_hooks AS (
    DELETE FROM dashboard.webhook_hours o USING hooks h
    WHERE h.opened AND o.webhook_id = h.webhook_id AND o.hour < h.hour - interval '8 days'
  )
  DELETE FROM dashboard.project_hours o USING projects p
  WHERE p.opened AND o.project_id = p.project_id AND o.hour < p.hour - interval '8 days';
END
$$;

-- Fires once per statement that logs attempts, after it, so each delivery is read as that
-- statement left it. The delivery worker's record statement stages its outcomes instead
-- (dashboard.apply_staged in dashboard-states.sql) and marks its transaction linkgate.staged:
-- then this returns at once. Attempts logged any other way (the previous build's worker during
-- a rolling upgrade, tests, seeds) are still counted here.
CREATE OR REPLACE FUNCTION dashboard.count_logged_attempts() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('linkgate.staged', true) = 'on' THEN
    RETURN NULL;
  END IF;
  PERFORM dashboard.add_outcomes(array_agg(dashboard.outcome(d.project_id, d.webhook_id, d.status, d.attempts, n.attempt, n.started_at, n.status_code, n.duration_ms)))
  FROM logged n JOIN public.deliveries d ON d.id = n.delivery_id
  HAVING count(*) > 0;
  RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER delivery_attempts_dashboard_hours
AFTER INSERT ON public.delivery_attempts
REFERENCING NEW TABLE AS logged
FOR EACH STATEMENT EXECUTE FUNCTION dashboard.count_logged_attempts();
