// `deliveries replay`: replayFailed (src/delivery/log.ts) in batches, so a replay of a million
// failed deliveries shows progress, keeps each statement short, and lets workers start sending
// the first batch while later ones are still being reset. Same semantics as replayFailed: every
// `failed` delivery of the webhook created at or after `since` becomes pending, due now, with
// its attempt counter reset; `gone`, pending and succeeded deliveries are left alone.
import type { Database } from "../db/client.ts";
import { DELIVERY_CHANNEL } from "../webhooks/outbox.ts";
import { WebhookNotFound } from "../errors.ts";

type DbLike = Pick<Database, "prisma">;

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
      UPDATE deliveries d
      SET status = 'pending', attempts = 0, next_attempt_at = now(), completed_at = NULL,
          lease_until = NULL, leased_by = NULL
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
      // Wake the workers now rather than at their next poll, as replayFailed does.
      await db.prisma.$executeRaw`SELECT pg_notify(${DELIVERY_CHANNEL}, '')`;
      total += batch.replayed;
      opts.onProgress?.(total);
    }
    cursor = batch.next;
  }
  return total;
}
