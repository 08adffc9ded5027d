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
-- The helpers are LANGUAGE sql with one SELECT and no FROM, so Postgres inlines them into the
-- statements that call them (test/db.migrations.test.ts checks that every SQL function is). It
-- inlines one only when each argument it repeats is cheap, a column (an expression, such as the
-- quarters gone by, once passed to a parameter read five times, was not inlined, and a call then
-- cost 4 µs a row where the inlined one costs 0.6, measured over 100,000 rows): so every helper takes
-- the counter's columns and works out the quarters gone by itself, once (a simple CASE), in
-- floating point (extract() is numeric: five of them took 1.9 µs a row).

-- Quarters of its window gone by since a counter's newest slice began (0 while it is the
-- current one). A transaction that began before another moved the counter on reads 0, not less.
CREATE OR REPLACE FUNCTION rate_limit_shift(p_start timestamp, p_window integer) RETURNS integer
LANGUAGE sql STABLE AS $$
  SELECT greatest(0, floor(date_part('epoch', now() - p_start) * 4 / p_window))::integer
$$;

-- A counter's count now: its five newest quarters, one fewer for each quarter gone by (a slice
-- leaves the counter when it is the sixth newest).
CREATE OR REPLACE FUNCTION rate_limit_count(p_slices integer[], p_start timestamp, p_window integer) RETURNS integer
LANGUAGE sql STABLE AS $$
  SELECT CASE rate_limit_shift(p_start, p_window)
           WHEN 0 THEN coalesce(p_slices[1], 0) + coalesce(p_slices[2], 0) + coalesce(p_slices[3], 0) + coalesce(p_slices[4], 0) + coalesce(p_slices[5], 0)
           WHEN 1 THEN coalesce(p_slices[1], 0) + coalesce(p_slices[2], 0) + coalesce(p_slices[3], 0) + coalesce(p_slices[4], 0)
           WHEN 2 THEN coalesce(p_slices[1], 0) + coalesce(p_slices[2], 0) + coalesce(p_slices[3], 0)
           WHEN 3 THEN coalesce(p_slices[1], 0) + coalesce(p_slices[2], 0)
           WHEN 4 THEN coalesce(p_slices[1], 0)
           ELSE 0 END
$$;

-- A counter's slices after `p_n` counts now: moved on by the quarters gone by (empty ones
-- between), the counts added to the newest, no more than five kept. What it then holds is
-- p_n + rate_limit_count of the slices before.
CREATE OR REPLACE FUNCTION rate_limit_bumped(p_slices integer[], p_start timestamp, p_window integer, p_n integer) RETURNS integer[]
LANGUAGE sql STABLE AS $$
  SELECT CASE rate_limit_shift(p_start, p_window)
           WHEN 0 THEN ARRAY[coalesce(p_slices[1], 0) + p_n] || p_slices[2:5]
           WHEN 1 THEN ARRAY[p_n] || p_slices[1:4]
           WHEN 2 THEN ARRAY[p_n, 0] || p_slices[1:3]
           WHEN 3 THEN ARRAY[p_n, 0, 0] || p_slices[1:2]
           WHEN 4 THEN ARRAY[p_n, 0, 0, 0] || p_slices[1:1]
           ELSE ARRAY[p_n] END
$$;

-- Where a counter's newest slice begins after a count now: on by the quarters gone by (the
-- slices stay on one grid, so no quarter is counted twice), or now when all of them had left.
CREATE OR REPLACE FUNCTION rate_limit_moved(p_start timestamp, p_window integer) RETURNS timestamp
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN rate_limit_shift(p_start, p_window) >= 5 THEN (now() AT TIME ZONE 'UTC')::timestamp(3)
              ELSE p_start + make_interval(secs => rate_limit_shift(p_start, p_window) * p_window / 4.0) END
$$;

-- Seconds until a counter holds fewer than `p_max` (a call it refuses now may come again then),
-- or NULL when it does now: the wait until enough of its oldest slices have left. PL/pgSQL for
-- the loop; src/rate-limit.ts reads it only for a counter that has reached its most.
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
