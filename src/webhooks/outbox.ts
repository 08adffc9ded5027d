// The transactional outbox: every domain change calls enqueue() with its own transaction, so
// an event exists exactly when the change committed. The envelope is serialized once here;
// every attempt of every delivery sends these bytes.
import type { Tx } from "../db/client.ts";
import { newOrderedId } from "../ids.ts";
import type { EventType } from "./event-types.ts";

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

/** The exact bytes of an event: every attempt of every delivery sends them. */
export function envelope(id: string, input: OutboxEventInput): string {
  const body: Record<string, unknown> = {
    id,
    event_type: input.eventType,
    created_at: nanoTimestamp(),
    project_id: input.projectId,
    data: input.data,
  };
  if (input.test) body.test = true;
  return JSON.stringify(body);
}

export async function enqueue(tx: Tx, input: OutboxEventInput): Promise<string> {
  return (await enqueueAll(tx, [input]))[0];
}

/**
 * Writes events and fans them out in ONE statement: outbox_enqueue (src/webhooks/outbox.sql;
 * link_verify calls the same function) writes the
 * events, one delivery per subscribed enabled webhook (seen in this transaction's snapshot), and
 * a NOTIFY that fires at commit only when there is something to deliver. A link verify writes
 * two events; as separate INSERTs plus fan-out plus notify that was six round trips inside the
 * business transaction, now it is one.
 */
export async function enqueueAll(tx: Tx, inputs: OutboxEventInput[]): Promise<string[]> {
  const ids = inputs.map(() => newOrderedId("evt"));
  await tx.$queryRaw`/* prepared: enqueue_events */
    SELECT outbox_enqueue(${DELIVERY_CHANNEL}, ${ids}::text[], ${inputs.map((i) => i.projectId)}::text[],
                          ${inputs.map((i) => i.eventType)}::text[], ${inputs.map((i, n) => envelope(ids[n], i))}::text[],
                          ${inputs.map((i) => !!i.test)}::boolean[], ${inputs.map((i) => i.test?.webhookId ?? null)}::text[])::text AS done`;
  return ids;
}
