-- Hand-written: the trigger that keeps the dashboard's hourly charts is named for the dashboard
-- (see migration 20261125170501_dashboard_deliveries_trigger_names: alone in its migration, so
-- the ACCESS EXCLUSIVE lock on delivery_attempts is the only table lock this transaction holds).
-- src/delivery/dashboard-rollups.sql re-creates it by this name.
ALTER TRIGGER delivery_attempts_console_hours ON public.delivery_attempts RENAME TO delivery_attempts_dashboard_hours;
