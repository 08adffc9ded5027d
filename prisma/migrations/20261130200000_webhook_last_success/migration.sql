-- Webhook.stats.lastSuccessAt is when the webhook's latest successful delivery completed, at any
-- time (docs/webhooks.md, "The delivery log"). The stats read it from the per-hour counts of the
-- last 26 hours and from the newest delivery created that succeeded, so a failed delivery of days
-- ago, replayed or redelivered and succeeding after every newer one, was not seen: the dashboard
-- showed the older success. This table keeps each webhook's latest success as the delivery
-- workers' staged numbers are applied (dashboard.apply_staged, src/delivery/dashboard-states.sql),
-- one upsert per webhook per applied batch, off the worker's record statement. A partial index of
-- succeeded deliveries would have answered it too, for an index entry written by every delivery.
--
-- Expand only: a new table the previous build neither reads nor writes (its record statements,
-- which stage nothing, leave it as it is: their successes are counted as before). Not filled
-- from the log: the stats still read the two sources above, which cover what succeeded before it.
CREATE TABLE dashboard.webhook_last_success (
  webhook_id text PRIMARY KEY REFERENCES public.webhooks(id) ON DELETE CASCADE,
  at timestamptz NOT NULL
);
