// Disabling webhooks whose deliveries have all failed for a day, run periodically by every
// worker (docs/webhooks.md).
import type { Database } from "../db/client.ts";

type DbLike = Pick<Database, "prisma">;

export type DisabledWebhook = { webhookId: string; projectId: string; failingSince: Date; reason: string };

/**
 * Disables every enabled webhook whose deliveries have all failed for 24 hours: it has failed
 * attempts in the last 24 hours, no successful attempt (delivery_ok: 200/201/202, of any of its
 * deliveries) in that time, and its
 * unbroken run of failures began at least 24 hours before `now`. Attempts of the last 3 days
 * are considered (so a webhook with no traffic for days is not judged on ancient failures),
 * and none from before its failuresCountedFrom (a webhook enabled again or given a new URL is
 * judged on what happened since).
 * Sets disabledReason, marks its pending deliveries as `failed` (they can be replayed with
 * replayFailed once it works again), and returns what it disabled; the caller logs the
 * `webhook.disabled` notice. Idempotent and safe to run from every worker at once.
 *
 * Those a worker holds at that moment are failed too. Left to their workers, none of them ever
 * became `failed`: the worker gave it back unsent (its breaker opened, it stopped, the webhook
 * was off when its send slot freed) or recorded its attempt as a retry, or its lease ran out
 * (the worker died), and it stayed pending, since no claim takes a disabled webhook's deliveries.
 * Their leases end with them (only a pending delivery is ever leased): their worker's record and
 * release find the delivery no longer theirs, and an attempt on its way is still logged but
 * changes nothing, as after any lost lease.
 */
export async function disableDeadWebhooks(db: DbLike, now: Date = new Date()): Promise<DisabledWebhook[]> {
  const at = now.toISOString();
  const rows = await db.prisma.$queryRaw<{ id: string; project_id: string; failing_since: Date; reason: string }[]>`
    WITH att AS (
      SELECT d.webhook_id, a.started_at, delivery_ok(a.status_code) AS ok
      FROM webhooks w
      JOIN deliveries d ON d.webhook_id = w.id AND d.created_at >= ${at}::timestamptz - interval '3 days'
      JOIN delivery_attempts a ON a.delivery_id = d.id
      WHERE w.enabled
        AND a.started_at >= ${at}::timestamptz - interval '3 days' AND a.started_at <= ${at}::timestamptz
        AND a.started_at >= coalesce(w.failures_counted_from, '-infinity'::timestamp)
    ),
    last_ok AS (
      SELECT webhook_id, max(started_at) AS at FROM att WHERE ok GROUP BY webhook_id
    ),
    candidates AS (
      SELECT att.webhook_id, min(att.started_at) AS failing_since
      FROM att LEFT JOIN last_ok USING (webhook_id)
      WHERE NOT att.ok AND att.started_at > coalesce(last_ok.at, '-infinity'::timestamp)
      GROUP BY att.webhook_id
      HAVING min(att.started_at) <= ${at}::timestamptz - interval '24 hours'
         AND max(att.started_at) >= ${at}::timestamptz - interval '24 hours'
    ),
    -- A success since then on a delivery created before the 3 days (a redelivery, or a replay
    -- of an older event) ends the run of failures too: att leaves those deliveries out, and a
    -- webhook taking them was disabled as failing (32nd review). Looked up only for the few
    -- webhooks about to be disabled, through their older deliveries.
    late_ok AS (
      SELECT c.webhook_id, max(a.started_at) AS at
      FROM candidates c
      JOIN deliveries d ON d.webhook_id = c.webhook_id AND d.created_at < ${at}::timestamptz - interval '3 days'
      JOIN delivery_attempts a ON a.delivery_id = d.id
      WHERE a.started_at > c.failing_since AND a.started_at <= ${at}::timestamptz AND delivery_ok(a.status_code)
      GROUP BY c.webhook_id
    ),
    dead AS (
      SELECT att.webhook_id, min(att.started_at) AS failing_since
      FROM candidates c
      JOIN att ON att.webhook_id = c.webhook_id
      LEFT JOIN late_ok ON late_ok.webhook_id = c.webhook_id
      WHERE NOT att.ok AND att.started_at >= c.failing_since AND att.started_at > coalesce(late_ok.at, '-infinity'::timestamp)
      GROUP BY att.webhook_id
      HAVING min(att.started_at) <= ${at}::timestamptz - interval '24 hours'
         AND max(att.started_at) >= ${at}::timestamptz - interval '24 hours'
    ),
    disabled AS (
      UPDATE webhooks w
      SET enabled = false, updated_at = now(),
          disabled_reason = 'every delivery attempt failed for 24 hours (failing since '
                            || to_char(dead.failing_since, 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ')'
      FROM dead
      WHERE w.id = dead.webhook_id AND w.enabled
      RETURNING w.id, w.project_id, dead.failing_since, w.disabled_reason AS reason
    ),
    abandoned AS (
      UPDATE deliveries
      SET status = 'failed', completed_at = now(), last_error = 'webhook disabled: every delivery attempt failed for 24 hours',
          lease_until = NULL, leased_by = NULL
      WHERE webhook_id IN (SELECT id FROM disabled) AND status = 'pending'
    )
    SELECT id, project_id, failing_since, reason FROM disabled`;
  return rows.map((r) => ({ webhookId: r.id, projectId: r.project_id, failingSince: r.failing_since, reason: r.reason }));
}
