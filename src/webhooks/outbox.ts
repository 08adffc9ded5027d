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

// The wall clock's nanoseconds at one instant and process.hrtime.bigint() then, and the last
// time handed out: see nanoTimestamp.
let anchor: { wallNs: bigint; mono: bigint } | undefined;
let lastNs = 0n;

/**
 * UTC ISO 8601 with nine fractional digits: the wall clock's milliseconds, refined by the
 * monotonic clock elapsed since it was last anchored to them, and later than every time this
 * process handed out before (docs/events.md, "The envelope": events of one change are written
 * in order, and a receiver orders what it got by created_at). The digits after the milliseconds
 * used to be hrtime modulo a millisecond, a counter unrelated to the wall clock's millisecond:
 * an event written after another, in the same change too, carried an earlier time by up to a
 * millisecond about once in 300 events written in a row.
 */
export function nanoTimestamp(now = new Date()): string {
  const ms = BigInt(now.getTime());
  const mono = process.hrtime.bigint();
  const [lo, hi] = [ms * 1_000_000n, ms * 1_000_000n + 999_999n];
  const estimate = anchor ? anchor.wallNs + (mono - anchor.mono) : lo;
  // kept within the wall clock's millisecond, and anchored again where it left it (the first
  // call, a clock that was set, drift): the milliseconds are always the wall clock's
  let ns = estimate < lo ? lo : estimate > hi ? hi : estimate;
  if (!anchor || ns !== estimate) anchor = { wallNs: ns, mono };
  // after the previous one; a wall clock set back by more than that is followed, not held
  if (ns <= lastNs && lastNs - ns < 2_000_000n) ns = lastNs + 1n;
  lastNs = ns;
  const fraction = (ns % 1_000_000n).toString().padStart(6, "0");
  return new Date(Number(ns / 1_000_000n)).toISOString().replace(/Z$/, `${fraction}Z`);
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
