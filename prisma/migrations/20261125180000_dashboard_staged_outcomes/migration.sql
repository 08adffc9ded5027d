-- Issue 26: the delivery worker's record statement no longer adds its batch to the dashboard's
-- rollups itself (two statement triggers did: 35 of the ~80 µs of database CPU per recorded
-- delivery). It stages the batch's outcomes and state changes here, one row per statement, and
-- dashboard.apply_staged (src/delivery/dashboard-states.sql) adds many staged rows to the
-- rollups at once: every second from each worker, and before the dashboard reads them.
--
-- Expand only: a new table. The previous build's record statement stages nothing and its
-- attempts and updates are still counted by the triggers, which skip only the statements that
-- staged (linkgate.staged).
CREATE TABLE dashboard.staged_outcomes (
  id bigserial PRIMARY KEY,
  outcomes dashboard.attempt_outcome[] NOT NULL,
  states dashboard.delivery_state_change[] NOT NULL
);
