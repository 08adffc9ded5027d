-- Repeatable migration (src/db/repeatable.ts): re-created whenever this file changes.

-- A change to a webhook that its claimed deliveries must not miss (deleted, disabled or enabled,
-- a new URL, a rotated secret) tells the delivery workers which webhook changed: a NOTIFY on the
-- channel they already listen on (DELIVERY_CHANNEL, src/webhooks/outbox.ts), with the payload
-- `webhook:<id>`, sent when the change commits. A worker reads the webhook again before it
-- starts any delivery of it claimed before it heard of the change (src/delivery/send-pool.ts):
-- the claim copied the URL and the secrets, and before this a delivery claimed up to a quarter
-- of a second before the change went as claimed (docs/webhooks.md, "Managing endpoints").
--
-- A trigger, not the service's code: every writer of webhooks is covered (the API, the daily
-- disabling of dead webhooks, a project's deletion cascading to its webhooks, an operator's
-- SQL). Webhooks change a few times a day; nothing on the delivery path writes them.
CREATE OR REPLACE FUNCTION webhook_changed_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE'
     AND (NEW.url, NEW.enabled, NEW.secret_sealed, NEW.previous_secret_sealed, NEW.previous_secret_expires_at)
         IS NOT DISTINCT FROM (OLD.url, OLD.enabled, OLD.secret_sealed, OLD.previous_secret_sealed, OLD.previous_secret_expires_at) THEN
    RETURN NULL;
  END IF;
  PERFORM pg_notify('linkgate_deliveries', 'webhook:' || OLD.id);
  RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER webhooks_changed_notify
AFTER UPDATE OF url, enabled, secret_sealed, previous_secret_sealed, previous_secret_expires_at OR DELETE ON public.webhooks
FOR EACH ROW EXECUTE FUNCTION webhook_changed_notify();
