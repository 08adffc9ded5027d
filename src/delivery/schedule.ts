// What happens after an attempt (docs/webhooks.md, "Answers, retries and the schedule"), as pure
// functions of the attempt's outcome, the retry schedule, the clock and a random source, so
// every rule is testable without a network or a database.

/** The only statuses that count as delivered. A 204 or a 3xx (redirects are not followed) is a failure. */
export const SUCCESS_STATUSES: ReadonlySet<number> = new Set([200, 201, 202]);
/** The receiver says the endpoint is gone for good: stop retrying this delivery. */
export const GONE_STATUS = 410;
/** Statuses whose Retry-After header is honoured. */
export const RETRY_AFTER_STATUSES: ReadonlySet<number> = new Set([429, 503]);
/** A Retry-After never postpones a retry by more than this. */
export const MAX_RETRY_AFTER_MS = 60 * 60 * 1000;
/** Each scheduled delay is stretched or shrunk by up to this fraction. */
export const JITTER = 0.2;

export type Decision =
  | { status: "succeeded" }
  | { status: "gone" }
  | { status: "failed" }
  | { status: "pending"; delayMs: number };

export type AttemptOutcome = {
  /** 1-based number of the attempt that just finished. */
  attempt: number;
  /** The HTTP status, or null when no response came (connection error, timeout, refused target). */
  statusCode: number | null;
  /** The raw Retry-After header of the response, if any. */
  retryAfter?: string | null;
};

/** Attempt 1 plus one retry per schedule entry: 6 with the default 5-step schedule (docs/webhooks.md). */
export function maxAttempts(scheduleMs: readonly number[]): number {
  return scheduleMs.length + 1;
}

/** `baseMs` with up to ±JITTER applied; `random` returns [0, 1) like Math.random. */
export function withJitter(baseMs: number, random: () => number = Math.random): number {
  const factor = 1 + JITTER * (2 * random() - 1);
  return Math.max(0, Math.round(baseMs * factor));
}

/**
 * A Retry-After header in milliseconds from `nowMs`: delay-seconds (`120`) or an HTTP date
 * (`Wed, 21 Oct 2026 07:28:00 GMT`). Dates in the past give 0; anything unparseable gives null.
 * Capped at MAX_RETRY_AFTER_MS.
 */
export function parseRetryAfter(value: string | null | undefined, nowMs: number): number | null {
  if (value == null) return null;
  const v = value.trim();
  if (v === "") return null;
  let ms: number;
  if (/^\d+$/.test(v)) {
    ms = Number(v) * 1000;
  } else {
    // HTTP dates always name the weekday and GMT; refusing other shapes keeps Date.parse's
    // lenient guessing (e.g. "12" as a year) out of the schedule.
    if (!/[a-z]{3},?\s/i.test(v) && !/GMT$/i.test(v)) return null;
    const at = Date.parse(v);
    if (Number.isNaN(at)) return null;
    ms = at - nowMs;
  }
  return Math.min(Math.max(0, ms), MAX_RETRY_AFTER_MS);
}

/**
 * The state a delivery moves to after an attempt.
 * * 200/201/202: succeeded. 410: gone (no more retries).
 * * Anything else (other statuses, no response): retried after scheduleMs[attempt - 1] ±20 %,
 *   or after the Retry-After of a 429/503 when that asks for longer (at most one hour);
 *   failed once `maxAttempts(scheduleMs)` attempts have failed.
 */
export function decide(
  outcome: AttemptOutcome,
  scheduleMs: readonly number[],
  opts: { nowMs?: number; random?: () => number } = {},
): Decision {
  const { attempt, statusCode, retryAfter } = outcome;
  if (statusCode !== null && SUCCESS_STATUSES.has(statusCode)) return { status: "succeeded" };
  if (statusCode === GONE_STATUS) return { status: "gone" };
  if (attempt >= maxAttempts(scheduleMs)) return { status: "failed" };
  const base = scheduleMs[Math.max(0, attempt - 1)] ?? scheduleMs[scheduleMs.length - 1] ?? 0;
  let delayMs = withJitter(base, opts.random);
  if (statusCode !== null && RETRY_AFTER_STATUSES.has(statusCode)) {
    const asked = parseRetryAfter(retryAfter, opts.nowMs ?? Date.now());
    if (asked !== null && asked > delayMs) delayMs = asked;
  }
  return { status: "pending", delayMs };
}
