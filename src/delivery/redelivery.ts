// Sending deliveries again: one (redeliver) or every failed one of a webhook since a time
// (replay), for the API and the CLI alike. Each becomes pending, due now, with its attempt
// counter reset: what that reset writes is AS_NEW in sql.ts, the one definition both use.
//
// Every function that serves a caller takes the caller as an actor, refuses any key but the
// project's secret one (docs/webhooks.md: everything about webhooks needs it) and puts the
// actor's project in the WHERE clause, so another project's rows are simply not found
// (DeliveryNotFound / WebhookNotFound). The CLI's replay (findReplayTarget, replayInBatches)
// has no actor: whoever runs it holds the database itself.
import type { Database } from "../db/client.ts";
import { requireSecretKey, type KeyActor } from "../deps.ts";
import { DeliveryNotFound, InvalidRequest, RateLimited, WebhookNotFound } from "../errors.ts";
import { consumePerProject, type Limit } from "../rate-limit.ts";
import { countReplayableStatement, heldDeliveryStatement, redeliverStatement, replayBatchStatement, wakeWorkersStatement, type ReplayCursor, type ReplayTarget } from "./sql.ts";

type DbLike = Pick<Database, "prisma" | "driver">;

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
  await db.prisma.$executeRaw(wakeWorkersStatement());
}

/**
 * Redeliveries a project may ask for in 10 minutes, of all its deliveries together. Each one
 * sends the body to its URL again at once, whatever the delivery's state, from the workers every
 * project shares: unbounded, one secret key could have linkgate POST to any public address as
 * fast as it can call (a flood with linkgate's addresses on it) and hold the shared send slots.
 * 100 is far more than anyone redelivers by hand; the failures of an outage go through a replay,
 * which resets each failed delivery at most once per schedule (docs/security.md, "Abuse limits").
 */
export const REDELIVERIES_PER_PROJECT: Limit = { max: 100, windowSeconds: 600 };

/** What a redelivery refuses with, besides bad credentials: its GraphQL field lists these. */
export const REDELIVER_ERRORS = [DeliveryNotFound, RateLimited];

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
 *
 * Only a redelivery of a delivery the project has counts against REDELIVERIES_PER_PROJECT, so
 * an unknown id is still DeliveryNotFound and changes nothing.
 */
export async function redeliver(db: DbLike, actor: KeyActor, deliveryId: string): Promise<DeliverySummary> {
  const { projectId } = requireSecretKey(actor);
  await findDelivery(db, projectId, deliveryId);
  await consumePerProject(db, "redeliveries_per_project", projectId, REDELIVERIES_PER_PROJECT);
  const rows = await db.prisma.$queryRaw<DeliveryRow[]>(redeliverStatement(projectId, deliveryId));
  if (rows.length > 0) {
    await notifyWorkers(db);
    return summary(rows[0]);
  }
  return findDelivery(db, projectId, deliveryId);
}

/** The project's delivery as it is, marked in flight (what redeliver answers when it reset nothing). */
async function findDelivery(db: DbLike, projectId: string, deliveryId: string): Promise<DeliverySummary> {
  const rows = await db.prisma.$queryRaw<DeliveryRow[]>(heldDeliveryStatement(projectId, deliveryId));
  if (rows.length === 0) throw new DeliveryNotFound();
  return summary(rows[0]);
}

/**
 * Redelivers every `failed` delivery of a webhook created at or after `since` (the event's
 * time, not the failure's), with redeliver's semantics; returns how many. `gone` deliveries
 * (the receiver answered 410) are not replayed, nor are pending or succeeded ones. Done in
 * batches (replayInBatches), like the CLI's replay: one statement never holds a million rows.
 */
export async function replayFailed(db: DbLike, actor: KeyActor, webhookId: string, since: Date): Promise<number> {
  const { projectId } = requireSecretKey(actor);
  assertStorableTime(since, "since");
  await assertWebhook(db, projectId, webhookId);
  const replayed = await replayInBatches(db, { projectId, webhookId, since }, { batchSize: REPLAY_BATCH });
  // Deleted while the batches waited for its deliveries (the deletion takes them with it): the
  // WebhookNotFound a moment later would give, not a replay of nothing (docs/webhooks.md).
  if (replayed === 0) await assertWebhook(db, projectId, webhookId);
  return replayed;
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

/** The webhook's project (webhook ids are unique across projects). */
export async function findReplayTarget(db: DbLike, webhookId: string, since: Date): Promise<ReplayTarget> {
  const webhook = await db.prisma.webhook.findUnique({ where: { id: webhookId }, select: { projectId: true } });
  if (!webhook) throw new WebhookNotFound();
  return { webhookId, projectId: webhook.projectId, since };
}

export async function countReplayable(db: DbLike, t: ReplayTarget): Promise<number> {
  const [{ n }] = await db.prisma.$queryRaw<{ n: number }[]>(countReplayableStatement(t));
  return n;
}

/** Resets the next `size` failed deliveries after `after` (replayBatchStatement). */
async function replayBatch(db: DbLike, t: ReplayTarget, after: ReplayCursor, size: number): Promise<{ replayed: number; next: ReplayCursor | null }> {
  const rows = await db.prisma.$queryRaw<{ replayed: number; created_at: string; id: string }[]>(replayBatchStatement(t, after, size));
  const row = rows[0];
  return row ? { replayed: row.replayed, next: { createdAt: row.created_at, id: row.id } } : { replayed: 0, next: null };
}

/** Replays in batches of `batchSize`, reporting the running total; returns how many. */
export async function replayInBatches(
  db: DbLike,
  t: ReplayTarget,
  opts: { batchSize: number; onProgress?: (replayed: number) => void },
): Promise<number> {
  let cursor: ReplayCursor | null = { createdAt: "-infinity", id: "" };
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
