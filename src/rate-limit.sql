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
-- statements that call them (test/db.migrations.test.ts checks that every SQL function is).

-- Quarters of its window gone by since a counter's newest slice began (0 while it is the
-- current one). A transaction that began before another moved the counter on reads 0, not less.
CREATE OR REPLACE FUNCTION rate_limit_shift(p_start timestamp, p_window integer) RETURNS integer
LANGUAGE sql STABLE AS $$
  SELECT greatest(0, floor(extract(epoch FROM now() - p_start) * 4 / p_window))::integer
$$;

-- What slices still hold once `p_shift` quarters went by: a slice leaves the counter when it is
-- the sixth newest.
CREATE OR REPLACE FUNCTION rate_limit_live(p_slices integer[], p_shift integer) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(CASE WHEN p_shift <= 4 THEN p_slices[1] END, 0) + coalesce(CASE WHEN p_shift <= 3 THEN p_slices[2] END, 0)
       + coalesce(CASE WHEN p_shift <= 2 THEN p_slices[3] END, 0) + coalesce(CASE WHEN p_shift <= 1 THEN p_slices[4] END, 0)
       + coalesce(CASE WHEN p_shift <= 0 THEN p_slices[5] END, 0)
$$;

-- A counter's count now.
CREATE OR REPLACE FUNCTION rate_limit_count(p_slices integer[], p_start timestamp, p_window integer) RETURNS integer
LANGUAGE sql STABLE AS $$
  SELECT rate_limit_live(p_slices, rate_limit_shift(p_start, p_window))
$$;

-- The slices after `p_n` counts now: moved on by `p_shift` quarters (empty ones between), the
-- counts added to the newest, no more than five kept.
CREATE OR REPLACE FUNCTION rate_limit_bumped(p_slices integer[], p_shift integer, p_n integer) RETURNS integer[]
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_shift = 0 THEN ARRAY[coalesce(p_slices[1], 0) + p_n] || p_slices[2:5]
              WHEN p_shift >= 5 THEN ARRAY[p_n]
              ELSE ARRAY[p_n] || array_fill(0, ARRAY[p_shift - 1]) || p_slices[1:5 - p_shift] END
$$;

-- Where the newest slice begins after a count now: `p_shift` quarters on (the slices stay on
-- the same grid, so a quarter is never counted twice), or now when all of them had left.
CREATE OR REPLACE FUNCTION rate_limit_moved(p_start timestamp, p_window integer, p_shift integer) RETURNS timestamp
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN p_shift >= 5 THEN (now() AT TIME ZONE 'UTC')::timestamp(3)
              ELSE p_start + make_interval(secs => p_shift * p_window / 4.0) END
$$;

-- Seconds until a counter holds fewer than `p_max` (a call it refuses now may come again then),
-- or NULL when it does now: the wait until enough of its oldest slices have left. PL/pgSQL for
-- the loop; it is read only for counters whose callers show the wait.
CREATE OR REPLACE FUNCTION rate_limit_wait(p_slices integer[], p_start timestamp, p_window integer, p_max integer) RETURNS integer
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_shift integer := rate_limit_shift(p_start, p_window);
BEGIN
  IF rate_limit_live(p_slices, v_shift) < p_max THEN
    RETURN NULL;
  END IF;
  FOR k IN v_shift + 1 .. 5 LOOP
    IF rate_limit_live(p_slices, k) < p_max THEN
      RETURN greatest(1, ceil(extract(epoch FROM p_start + make_interval(secs => k * p_window / 4.0) - now())))::integer;
    END IF;
  END LOOP;
  -- a most of 0 refuses every call: say the whole window
  RETURN p_window;
END
$$;
