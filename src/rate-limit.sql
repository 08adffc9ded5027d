-- Repeatable migration (src/db/repeatable.ts): re-created whenever this file changes.
-- The table it reads changes only in prisma/migrations.
--
-- How a counter of rate_limits counts (src/rate-limit.ts counts and checks them; docs/security.md,
-- "Abuse limits", says what a limit promises): over a sliding window, so that no span of a
-- limit's window ever holds more than its most. Fixed windows held up to twice as many: a whole
-- budget used in the last seconds of one window and again in the first seconds of the next.
--
-- A counter keeps its counts by quarter of its window ("slices"), newest first; the newest
-- starts at window_start. It holds what its last five quarters hold: the whole last window, and
-- at most one quarter before it (the oldest quarter is counted whole until it is entirely out of
-- the window). So a count is forgotten between one window and a window and a quarter after it
-- was made, never sooner: a limit's most holds in every window, and a refused caller waits at
-- most a quarter of a window longer than under a fixed one. Five integers a row: an exact log of
-- every count would be a row per count (project-wide ceilings take thousands an hour).
--
-- The helpers are PL/pgSQL. As LANGUAGE sql functions Postgres inlined them, and the statement
-- that counts a code send (src/rate-limit.ts count_all) took 1.5 to 3 ms to plan instead of 0.8
-- to 1.2: a prepared statement is planned again after every ANALYZE of its tables, which tables
-- that grow get often, and the sign-in benchmark's new users cost 15 to 25 % more database CPU
-- (bench/RESULTS.md, sign-in). As PL/pgSQL, planned once per connection, a count_all of seven
-- counters costs about 0.08 ms more to run than with fixed windows, and no more to plan (pgbench
-- on a slow machine of this kind: 0.29 against 0.21 ms prepared, 4.8 against 4.8 ms planned
-- each time; inlined, 0.35 and 7.5 ms).

-- Quarters of its window gone by since a counter's newest slice began (0 while it is the
-- current one). A transaction that began before another moved the counter on reads 0, not less.
-- One expression, so Postgres inlines it into the functions below (test/db.migrations.test.ts
-- checks that every LANGUAGE sql function is).
CREATE OR REPLACE FUNCTION rate_limit_shift(p_start timestamp, p_window integer) RETURNS integer
LANGUAGE sql STABLE AS $$
  SELECT greatest(0, floor(date_part('epoch', now() - p_start) * 4 / p_window))::integer
$$;

-- A counter's count now: its five newest quarters, one fewer for each quarter gone by (a slice
-- leaves the counter when it is the sixth newest).
CREATE OR REPLACE FUNCTION rate_limit_count(p_slices integer[], p_start timestamp, p_window integer) RETURNS integer
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_count integer := 0;
BEGIN
  FOR i IN 1 .. 5 - rate_limit_shift(p_start, p_window) LOOP
    v_count := v_count + coalesce(p_slices[i], 0);
  END LOOP;
  RETURN v_count;
END
$$;

-- A counter's slices after `p_n` counts now: moved on by the quarters gone by (empty ones
-- between), the counts added to the newest, no more than five kept. What it then holds is
-- p_n + rate_limit_count of the slices before.
CREATE OR REPLACE FUNCTION rate_limit_bumped(p_slices integer[], p_start timestamp, p_window integer, p_n integer) RETURNS integer[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_shift integer := rate_limit_shift(p_start, p_window);
BEGIN
  IF v_shift = 0 THEN
    RETURN ARRAY[coalesce(p_slices[1], 0) + p_n] || p_slices[2:5];
  ELSIF v_shift >= 5 THEN
    RETURN ARRAY[p_n];
  END IF;
  RETURN ARRAY[p_n] || array_fill(0, ARRAY[v_shift - 1]) || p_slices[1:5 - v_shift];
END
$$;

-- Where a counter's newest slice begins after a count now: on by the quarters gone by (the
-- slices stay on one grid, so no quarter is counted twice), or now when all of them had left.
CREATE OR REPLACE FUNCTION rate_limit_moved(p_start timestamp, p_window integer) RETURNS timestamp
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_shift integer := rate_limit_shift(p_start, p_window);
BEGIN
  IF v_shift >= 5 THEN
    RETURN (now() AT TIME ZONE 'UTC')::timestamp(3);
  END IF;
  RETURN p_start + make_interval(secs => v_shift * p_window / 4.0);
END
$$;

-- Seconds until a counter holds fewer than `p_max` (a call it refuses now may come again then),
-- or NULL when it does now: the wait until enough of its oldest slices have left.
-- src/rate-limit.ts reads it only for a counter that has reached its most.
CREATE OR REPLACE FUNCTION rate_limit_wait(p_slices integer[], p_start timestamp, p_window integer, p_max integer) RETURNS integer
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_shift integer := rate_limit_shift(p_start, p_window);
  v_live integer := rate_limit_count(p_slices, p_start, p_window);
BEGIN
  IF v_live < p_max THEN
    RETURN NULL;
  END IF;
  -- at k quarters gone by, the slice that is then the sixth newest has left
  FOR k IN v_shift + 1 .. 5 LOOP
    v_live := v_live - coalesce(p_slices[6 - k], 0);
    IF v_live < p_max THEN
      RETURN greatest(1, ceil(extract(epoch FROM p_start + make_interval(secs => k * p_window / 4.0) - now())))::integer;
    END IF;
  END LOOP;
  -- a most of 0 refuses every call: say the whole window
  RETURN p_window;
END
$$;

-- Counts that gateways of the previous release make, put in the slices as they are made. During
-- an upgrade both builds serve side by side, at any pace, and a rollback brings the old one back
-- (docs/operations.md, "Upgrades without downtime"). Its statements count into `count` and
-- `window_start` as fixed windows and never write `slices`. Left as they were, its counts were not
-- seen here; and a window of its own that had ended it started again at `now()`, moving the
-- slices this release had left there with it, so counts that had left their window counted again
-- for up to a window and a quarter more: five codes sent twenty minutes before, and one by an old
-- gateway, refused the next code for twelve minutes.
--
-- Every statement of this release writes `slices`, and leaves `count` the sum of the slices; the
-- previous release's leave the slices as they were and change `count`: the count it adds is what
-- it added to `count`, or all of `count` when it moved `window_start` (its window had ended). A
-- write that fits neither (an operator setting `count` to 0) is left as it is. This release's
-- counts change the slices but for rare patterns (five equal quarters moved on by one), so the
-- triggers' WHEN, which Postgres checks without calling anything, keeps them from the function;
-- one that gets there finds the sum and returns at once. A later release, once no gateway of the
-- previous one is left, drops the triggers (contract).
CREATE OR REPLACE FUNCTION rate_limit_previous_release() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_n integer;
BEGIN
  IF TG_OP = 'INSERT' THEN
    NEW.slices := ARRAY[NEW.count];
    RETURN NEW;
  END IF;
  IF NEW.count = (SELECT coalesce(sum(s), 0) FROM unnest(NEW.slices) AS s) THEN
    RETURN NEW;
  END IF;
  v_n := CASE WHEN NEW.window_start = OLD.window_start THEN NEW.count - OLD.count ELSE NEW.count END;
  IF v_n < 1 THEN
    RETURN NEW;
  END IF;
  NEW.slices := rate_limit_bumped(OLD.slices, OLD.window_start, OLD.window_seconds, v_n);
  NEW.count := v_n + rate_limit_count(OLD.slices, OLD.window_start, OLD.window_seconds);
  NEW.window_start := rate_limit_moved(OLD.window_start, OLD.window_seconds);
  RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER rate_limits_previous_release_insert
  BEFORE INSERT ON rate_limits FOR EACH ROW
  WHEN (coalesce(cardinality(NEW.slices), 0) = 0)
  EXECUTE FUNCTION rate_limit_previous_release();

CREATE OR REPLACE TRIGGER rate_limits_previous_release_update
  BEFORE UPDATE ON rate_limits FOR EACH ROW
  WHEN (NEW.slices IS NOT DISTINCT FROM OLD.slices)
  EXECUTE FUNCTION rate_limit_previous_release();
