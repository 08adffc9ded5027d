// Prefixed ids (`acc_…`), readable in logs. Most are 16 random bytes: unguessable, sortable by
// nothing. The rows the outbox and the delivery log write at the event rate (events, deliveries,
// attempts) get ordered ids instead, which start with the time they were made: a new row's key
// then lands at the right-hand end of its B-tree index, not on a random page of it
// (docs/operations.md, "Ids of the outbox and the delivery log"). Nothing looks those rows up by
// a guessed id: every read is scoped to the caller's project.
import { randomBytes, randomFillSync } from "node:crypto";

export type IdPrefix = "prj" | "key" | "acc" | "idt" | "otp" | "ses" | "kid" | "wh" | "evt" | "dlv" | "att" | "psk" | "ntc" | "idp" | "xfl";

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBytes(16).toString("base64url")}`;
}

/** What newId and newOrderedId make: a short prefix, an underscore, base64url. */
const ID_SHAPE = /^([a-z]{2,4})_[A-Za-z0-9_-]{1,64}$/;

/**
 * Whether a value is shaped like an id (of that prefix, when one is given): what a forged cursor,
 * a mistyped id or a project id passed as a key id fails before it reaches SQL.
 */
export function isIdShaped(value: string, prefix?: IdPrefix): boolean {
  const m = ID_SHAPE.exec(value);
  return m !== null && (prefix === undefined || m[1] === prefix);
}

export type OrderedIdPrefix = "evt" | "dlv" | "att";

/** Random bytes after an ordered id's time: 80 bits (the deliveries' ids, made in SQL, carry 78: src/webhooks/outbox.sql). */
const ORDERED_RANDOM_BYTES = 10;
// Cut from one buffer filled 256 ids at a time: one call into the system's randomness per id
// cost ~2–6 µs per delivery on a busy machine.
const pool = Buffer.alloc(ORDERED_RANDOM_BYTES * 256);
let next = pool.length;

/**
 * The prefix, `_`, the milliseconds since the epoch in 12 hex digits and 10 random bytes in
 * base64url. Ids of different milliseconds sort by time as text (lower-case hex digits of one
 * length, under any collation); within one millisecond they sort at random.
 */
export function newOrderedId(prefix: OrderedIdPrefix, nowMs = Date.now()): string {
  if (next === pool.length) {
    randomFillSync(pool);
    next = 0;
  }
  const random = pool.toString("base64url", next, next + ORDERED_RANDOM_BYTES);
  next += ORDERED_RANDOM_BYTES;
  return `${prefix}_${nowMs.toString(16).padStart(12, "0")}${random}`;
}
