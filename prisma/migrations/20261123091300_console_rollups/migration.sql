-- Hand-written: what the console of the dashboard reads, kept where a chart or a support lookup can
-- answer in milliseconds whatever the size of the delivery log.
--
-- Schema "console" holds derived data only: every row follows from delivery_attempts and can be
-- rebuilt from it. Triggers write it and src/delivery/charts.ts reads it with raw SQL, and Prisma
-- neither reads nor writes it, so it stays out of schema.prisma (the Prisma datamodel and its drift
-- check cover the public schema).
CREATE SCHEMA IF NOT EXISTS console;

-- Latency of successful attempts as a histogram of 128 buckets: bucket 0 holds 0 ms, bucket k ≥ 1
-- holds [2^((k-1)/8), 2^(k/8)) ms (each 9 % wider than the last), bucket 127 everything from 55 s.
-- Histograms add up, so the p50 and p95 come from summing hours, within
-- the width of one bucket of the exact value, for any interval or project.
CREATE FUNCTION console.latency_bucket(ms integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN ms IS NULL OR ms <= 0 THEN 0 ELSE least(127, 1 + floor(8 * ln(ms::float8) / ln(2::float8))::integer) END
$$;

-- The histogram (128 counts) of a list of bucket numbers.
CREATE FUNCTION console.histogram(buckets integer[]) RETURNS integer[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT array_agg(coalesce(c.n, 0) ORDER BY k)
  FROM generate_series(0, 127) AS k
  LEFT JOIN (SELECT b, count(*)::integer AS n FROM unnest(buckets) AS b GROUP BY b) c ON c.b = k
$$;

CREATE FUNCTION console.add_histograms(a integer[], b integer[]) RETURNS integer[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT array_agg(coalesce(x, 0) + coalesce(y, 0) ORDER BY k) FROM unnest(a, b) WITH ORDINALITY AS u(x, y, k)
$$;

-- Per webhook and hour (UTC), the attempts started in it: succeeded (200/201/202), retried (failed,
-- and another attempt was scheduled), failed (failed, and the delivery gave up: the schedule was
-- used up or the receiver answered 410), and the latency histogram of the successful ones.
CREATE TABLE console.webhook_hours (
  webhook_id text NOT NULL REFERENCES public.webhooks (id) ON DELETE CASCADE,
  project_id text NOT NULL,
  hour timestamptz NOT NULL,
  succeeded integer NOT NULL,
  retried integer NOT NULL,
  failed integer NOT NULL,
  latency integer[] NOT NULL,
  PRIMARY KEY (webhook_id, hour)
);

-- The same across all the webhooks of a project, so the overview reads one row an hour however many
-- webhooks there are. It keeps counting the attempts of webhooks deleted since: they happened.
CREATE TABLE console.project_hours (
  project_id text NOT NULL REFERENCES public.projects (id) ON DELETE CASCADE,
  hour timestamptz NOT NULL,
  succeeded integer NOT NULL,
  retried integer NOT NULL,
  failed integer NOT NULL,
  latency integer[] NOT NULL,
  PRIMARY KEY (project_id, hour)
);

-- One logged attempt, as the tables count it.
CREATE TYPE console.attempt_outcome AS (
  project_id text, webhook_id text, started_at timestamptz, ok boolean, gave_up boolean, duration_ms integer
);

-- The outcomes of a batch of attempts, each with its delivery as the statement that logged them
-- left it: a failed attempt gave up when the receiver answered 410, or when its delivery is now
-- failed or gone at that very attempt number.
CREATE FUNCTION console.outcome(
  project_id text, webhook_id text, delivery_status public.delivery_status, delivery_attempts integer,
  attempt integer, started_at timestamptz, status_code integer, duration_ms integer
) RETURNS console.attempt_outcome
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT ROW(project_id, webhook_id, started_at, coalesce(status_code IN (200, 201, 202), false),
             NOT coalesce(status_code IN (200, 201, 202), false)
               AND (status_code IS NOT DISTINCT FROM 410 OR (delivery_attempts = attempt AND delivery_status IN ('failed', 'gone'))),
             duration_ms)::console.attempt_outcome
$$;

-- Adds a batch of outcomes to both tables. Rows are upserted in key order, so concurrent batches
-- never deadlock on them. A row opened for a new hour also drops the rows of that key older than
-- 8 days: nothing reads them, and this keeps each webhook at ~200 rows with no sweeper.
CREATE FUNCTION console.add_outcomes(batch console.attempt_outcome[]) RETURNS void
LANGUAGE sql AS $$
  WITH a AS (
    SELECT project_id, webhook_id, date_trunc('hour', started_at) AS hour, ok, gave_up, console.latency_bucket(duration_ms) AS bucket
    FROM unnest(batch)
  ), hooks AS (
    INSERT INTO console.webhook_hours AS s (webhook_id, project_id, hour, succeeded, retried, failed, latency)
    SELECT webhook_id, project_id, hour,
           count(*) FILTER (WHERE ok), count(*) FILTER (WHERE NOT ok AND NOT gave_up), count(*) FILTER (WHERE gave_up),
           console.histogram(array_agg(bucket) FILTER (WHERE ok))
    FROM a GROUP BY webhook_id, project_id, hour
    ORDER BY webhook_id, hour
    ON CONFLICT (webhook_id, hour) DO UPDATE
      SET succeeded = s.succeeded + excluded.succeeded, retried = s.retried + excluded.retried,
          failed = s.failed + excluded.failed, latency = console.add_histograms(s.latency, excluded.latency)
    RETURNING webhook_id, hour, xmax = 0 AS opened
  ), projects AS (
    INSERT INTO console.project_hours AS s (project_id, hour, succeeded, retried, failed, latency)
    SELECT project_id, hour,
           count(*) FILTER (WHERE ok), count(*) FILTER (WHERE NOT ok AND NOT gave_up), count(*) FILTER (WHERE gave_up),
           console.histogram(array_agg(bucket) FILTER (WHERE ok))
    FROM a GROUP BY project_id, hour
    ORDER BY project_id, hour
    ON CONFLICT (project_id, hour) DO UPDATE
      SET succeeded = s.succeeded + excluded.succeeded, retried = s.retried + excluded.retried,
          failed = s.failed + excluded.failed, latency = console.add_histograms(s.latency, excluded.latency)
    RETURNING project_id, hour, xmax = 0 AS opened
  ), old_hooks AS (
    DELETE FROM console.webhook_hours o USING hooks h
    WHERE h.opened AND o.webhook_id = h.webhook_id AND o.hour < h.hour - interval '8 days'
  )
  DELETE FROM console.project_hours o USING projects p
  WHERE p.opened AND o.project_id = p.project_id AND o.hour < p.hour - interval '8 days'
$$;

-- Fires once per statement that logs attempts (the delivery worker logs a whole batch in one),
-- after it, so each delivery is read as that statement left it.
-- (Its body is an escape string, semicolons written \x3B: Prisma applies a migration to Postgres
-- by splitting it at every semicolon, quoted or not.)
CREATE FUNCTION console.count_logged_attempts() RETURNS trigger
LANGUAGE plpgsql AS E'
BEGIN
  PERFORM console.add_outcomes(array_agg(console.outcome(d.project_id, d.webhook_id, d.status, d.attempts, n.attempt, n.started_at, n.status_code, n.duration_ms)))
  FROM logged n JOIN public.deliveries d ON d.id = n.delivery_id
  HAVING count(*) > 0\x3B
  RETURN NULL\x3B
END';

CREATE TRIGGER delivery_attempts_console_hours
AFTER INSERT ON public.delivery_attempts
REFERENCING NEW TABLE AS logged
FOR EACH STATEMENT EXECUTE FUNCTION console.count_logged_attempts();

-- The last 8 days of attempts already logged.
SELECT console.add_outcomes(array_agg(console.outcome(d.project_id, d.webhook_id, d.status, d.attempts, n.attempt, n.started_at, n.status_code, n.duration_ms)))
FROM public.delivery_attempts n JOIN public.deliveries d ON d.id = n.delivery_id
WHERE n.started_at >= now() - interval '8 days'
HAVING count(*) > 0;

-- The recent events of an account, for the support view, without reading the whole outbox: the account
-- an event is about (data.user.user_id on every user.* event, data.user_id on a security event
-- that names one), and the secondary of a merge or unmerge (which names the primary as its user).
-- Partial: test events belong to nobody.
CREATE FUNCTION console.event_account(body text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(j #>> '{data,user,user_id}', j #>> '{data,user_id}') FROM (SELECT body::jsonb AS j) AS e
$$;

CREATE FUNCTION console.event_secondary_account(body text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT body::jsonb #>> '{data,secondary_user_id}'
$$;

CREATE INDEX outbox_events_account_idx ON public.outbox_events (project_id, console.event_account(body), seq)
WHERE NOT test;

CREATE INDEX outbox_events_secondary_account_idx ON public.outbox_events (project_id, console.event_secondary_account(body), seq)
WHERE NOT test AND event_type IN ('user.merged', 'user.unmerged');
