// The transactional outbox: every domain change calls enqueue() with its own transaction, so
// an event exists exactly when the change committed. The envelope is serialized once here;
// every attempt of every delivery sends these bytes.
import type { Tx } from "../db/client.ts";
import { newId } from "../ids.ts";
import type { EventType } from "../webhooks/event-types.ts";

export const DELIVERY_CHANNEL = "linkgate_deliveries";

export type OutboxEventInput = {
  projectId: string;
  eventType: EventType;
  data: Record<string, unknown>;
  /** test events go to this one webhook only */
  test?: { webhookId: string };
};

/** UTC ISO 8601 with nine fractional digits; the sub-millisecond part comes from hrtime. */
export function nanoTimestamp(now = new Date()): string {
  const ns = (process.hrtime.bigint() % 1_000_000n).toString().padStart(6, "0");
  return now.toISOString().replace(/\.(\d{3})Z$/, `.$1${ns}Z`);
}

export async function enqueue(tx: Tx, input: OutboxEventInput): Promise<string> {
  const id = newId("evt");
  const envelope: Record<string, unknown> = {
    id,
    event_type: input.eventType,
    created_at: nanoTimestamp(),
    project_id: input.projectId,
    data: input.data,
  };
  if (input.test) envelope.test = true;
  await tx.outboxEvent.create({
    data: { id, projectId: input.projectId, eventType: input.eventType, body: JSON.stringify(envelope), test: !!input.test },
  });
  await fanOut(tx, id, input);
  return id;
}

// One INSERT … SELECT: the fan-out costs one statement however many webhooks subscribe, and
// sees exactly the webhooks that exist in this transaction's snapshot.
async function fanOut(tx: Tx, eventId: string, input: OutboxEventInput): Promise<void> {
  const inserted = await tx.$executeRaw`
    INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type)
    SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), ${eventId}, w.id, w.project_id, ${input.eventType}
    FROM webhooks w
    WHERE w.project_id = ${input.projectId}
      AND w.enabled
      AND ${input.eventType} = ANY (w.events)
      AND (${input.test?.webhookId ?? null}::text IS NULL OR w.id = ${input.test?.webhookId ?? null})`;
  if (inserted > 0) await tx.$executeRaw`SELECT pg_notify(${DELIVERY_CHANNEL}, '')`;
}
