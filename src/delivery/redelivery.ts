// Sending deliveries again: one (redeliver) or every failed one of a webhook since a time
// (replay), for the API and the CLI alike. Each becomes pending, due now, with its attempt
// counter reset: what that reset writes is AS_NEW, the one definition both use.
//
// Every function that serves a caller takes the caller's projectId and puts it in the WHERE
// clause, so another project's rows are simply not found (DeliveryNotFound / WebhookNotFound).
import type { Database } from "../db/client.ts";
import { DeliveryNotFound, InvalidRequest, WebhookNotFound } from "../errors.ts";
import { Prisma } from "../generated/prisma/client.ts";
import { DELIVERY_CHANNEL } from "../webhooks/outbox.ts";
import { leaseFree } from "./pending.ts";

type DbLike = Pick<Database, "prisma">;

/** A delivery starting a fresh cycle: pending, due now, no attempts, no lease. */
const AS_NEW = Prisma.sql`status = 'pending', attempts = 0, next_attempt_at = now(), completed_at = NULL, lease_until = NULL, leased_by = NULL`;

/** Rows reset per statement by a replay: short statements, and workers start on the first batch. */
const REPLAY_BATCH = 2_000;

export type DeliveryStatus = "pending" | "succeeded" | "failed" | "gone";

export type DeliverySummary = {
  id: string;
  eventId: string;
  webhookId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: Date;
  /** True while a worker holds the delivery (an attempt is being sent or recorded). */
  inFlight: boolean;
};

type DeliveryRow = {
  id: string;
  event_id: string;
  webhook_id: string;
  event_type: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: Date;
  in_flight: boolean;
};

const summary = (r: DeliveryRow): DeliverySummary => ({
  id: r.id,
  eventId: r.event_id,
  webhookId: r.webhook_id,
  eventType: r.event_type,
  status: r.status,
  attempts: Number(r.attempts),
  nextAttemptAt: r.next_attempt_at,
  inFlight: Boolean(r.in_flight),
});

async function notifyWorkers(db: DbLike): Promise<void> {
  await db.prisma.$executeRaw`SELECT pg_notify(${DELIVERY_CHANNEL}, '')`;
}

/**
 * Sends one delivery again, with the same event and the same body bytes.
 *
 * Semantics: a redelivery starts a fresh cycle. The delivery becomes `pending`, due now, with
 * its attempt counter reset to 0, so the next attempt carries `X-Service-Delivery-Attempt: 1`
 * and gets the whole retry schedule again (headers stay within the 1…6 of docs/webhooks.md, "A
 * delivery"). The attempt log keeps every earlier attempt (rows are told apart by started_at). A
 * delivery that a worker holds right now is left alone and returned as it is: it is being
 * attempted anyway, and resetting it under the worker would send it twice. A delivery of a
 * disabled webhook stays pending until the webhook is enabled again.
 */
export async function redeliver(db: DbLike, projectId: string, deliveryId: string): Promise<DeliverySummary> {
  const rows = await db.prisma.$queryRaw<DeliveryRow[]>`
    UPDATE deliveries SET ${AS_NEW}
    WHERE id = ${deliveryId} AND project_id = ${projectId}
      AND (status <> 'pending' OR ${Prisma.raw(leaseFree("deliveries"))})
    RETURNING id, event_id, webhook_id, event_type, status::text AS status, attempts, next_attempt_at, false AS in_flight`;
  if (rows.length > 0) {
    await notifyWorkers(db);
    return summary(rows[0]);
  }
  const current = await db.prisma.$queryRaw<DeliveryRow[]>`
    SELECT id, event_id, webhook_id, event_type, status::text AS status, attempts, next_attempt_at, true AS in_flight
    FROM deliveries WHERE id = ${deliveryId} AND project_id = ${projectId}`;
  if (current.length === 0) throw new DeliveryNotFound();
  return summary(current[0]);
}

/**
 * Redelivers every `failed` delivery of a webhook created at or after `since` (the event's
 * time, not the failure's), with redeliver's semantics; returns how many. `gone` deliveries
 * (the receiver answered 410) are not replayed, nor are pending or succeeded ones. Done in
 * batches (replayInBatches), like the CLI's replay: one statement never holds a million rows.
 */
export async function replayFailed(db: DbLike, projectId: string, webhookId: string, since: Date): Promise<number> {
  assertStorableTime(since, "since");
  await assertWebhook(db, projectId, webhookId);
  return replayInBatches(db, { projectId, webhookId, since }, { batchSize: REPLAY_BATCH });
}

/**
 * Years 1…9999, what an ISO 8601 timestamp spells with four digits. Outside them the text that
 * goes to Postgres is one it refuses ("0000-…" has no year 0, "+010000-…" no sign), which
 * would surface as a fault instead of the caller's mistake.
 */
function assertStorableTime(at: Date, name: string): void {
  const year = at.getUTCFullYear();
  if (!(year >= 1 && year <= 9999)) throw new InvalidRequest(`${name} must be a time between the years 1 and 9999`);
}

async function assertWebhook(db: DbLike, projectId: string, webhookId: string) {
  const webhook = await db.prisma.webhook.findFirst({ where: { id: webhookId, projectId }, select: { id: true } });
  if (!webhook) throw new WebhookNotFound();
  return webhook;
}

// ---- replaying in batches (the API and `linkgate deliveries replay`) -------------------------

export type ReplayTarget = { webhookId: string; projectId: string; since: Date };

/** The webhook's project (webhook ids are unique across projects). */
export async function findReplayTarget(db: DbLike, webhookId: string, since: Date): Promise<ReplayTarget> {
  const webhook = await db.prisma.webhook.findUnique({ where: { id: webhookId }, select: { projectId: true } });
  if (!webhook) throw new WebhookNotFound();
  return { webhookId, projectId: webhook.projectId, since };
}

export async function countReplayable(db: DbLike, t: ReplayTarget): Promise<number> {
  const [{ n }] = await db.prisma.$queryRaw<{ n: number }[]>`
    SELECT count(*)::int AS n FROM deliveries
    WHERE webhook_id = ${t.webhookId} AND project_id = ${t.projectId} AND status = 'failed'
      AND created_at >= ${t.since.toISOString()}::timestamptz`;
  return n;
}

type Cursor = { createdAt: string; id: string };

/**
 * Resets the next `size` failed deliveries after `after`, walking the (webhook_id, created_at)
 * index in (created_at, id) order. The cursor makes the walk finish even if a delivery fails
 * again while the replay runs; created_at travels as text so no time zone conversion can move it.
 */
async function replayBatch(db: DbLike, t: ReplayTarget, after: Cursor, size: number): Promise<{ replayed: number; next: Cursor | null }> {
  const rows = await db.prisma.$queryRaw<{ replayed: number; created_at: string; id: string }[]>`
    WITH batch AS (
      SELECT id, created_at FROM deliveries
      WHERE webhook_id = ${t.webhookId} AND project_id = ${t.projectId} AND status = 'failed'
        AND created_at >= ${t.since.toISOString()}::timestamptz
        AND (created_at, id) > (${after.createdAt}::timestamp, ${after.id})
      ORDER BY created_at, id
      LIMIT ${size}
    ),
    replayed AS (
      UPDATE deliveries d SET ${AS_NEW}
      FROM batch
      WHERE d.id = batch.id AND d.status = 'failed'
      RETURNING d.id
    )
    SELECT (SELECT count(*) FROM replayed)::int AS replayed, last.created_at::text AS created_at, last.id
    FROM (SELECT created_at, id FROM batch ORDER BY created_at DESC, id DESC LIMIT 1) last`;
  const row = rows[0];
  return row ? { replayed: row.replayed, next: { createdAt: row.created_at, id: row.id } } : { replayed: 0, next: null };
}

/** Replays in batches of `batchSize`, reporting the running total; returns how many. */
export async function replayInBatches(
  db: DbLike,
  t: ReplayTarget,
  opts: { batchSize: number; onProgress?: (replayed: number) => void },
): Promise<number> {
  let cursor: Cursor | null = { createdAt: "-infinity", id: "" };
  let total = 0;
  while (cursor) {
    const batch = await replayBatch(db, t, cursor, opts.batchSize);
    if (batch.replayed > 0) {
      // wake the workers now rather than at their next poll
      await notifyWorkers(db);
      total += batch.replayed;
      opts.onProgress?.(total);
    }
    cursor = batch.next;
  }
  return total;
}
