-- Hand-written: the triggers that keep the dashboard's per-state counts are named for the
-- dashboard, not the console (its old name, migration 20261125170500_dashboard_schema). They keep
-- their functions and definitions, and src/delivery/dashboard-states.sql re-creates them by these
-- names. ALTER TRIGGER ... RENAME locks deliveries ACCESS EXCLUSIVE until this migration commits:
-- the three statements are alone in their migration (one table, one short transaction), and
-- delivery_attempts' trigger is renamed in the next one, so this transaction never holds one of
-- the two tables while it waits for the other (the worker's record statement locks both).
ALTER TRIGGER deliveries_console_states_insert_finished ON public.deliveries RENAME TO deliveries_dashboard_states_insert_finished;

ALTER TRIGGER deliveries_console_states_update ON public.deliveries RENAME TO deliveries_dashboard_states_update;

ALTER TRIGGER deliveries_console_states_delete ON public.deliveries RENAME TO deliveries_dashboard_states_delete;
