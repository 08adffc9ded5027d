// Security notices: written in the transaction of the change they announce (an outbox, like
// webhook events) and sent afterwards by a small sender in every gateway process, retried on a
// schedule. A mail server that is down delays a notice and never the change; a restart loses
// nothing, because the schedule lives in each notice's next_attempt_at.

import type { Database, Db, Tx } from "../db/client.ts";
import { prepared, run } from "../db/fast.ts";
import { newId } from "../ids.ts";
import type { Logger } from "../log.ts";
import type { Messenger, Recipient } from "./transport.ts";

export type Notice = { to: Recipient; subject: string; text: string };

/** Delays before retries 1, 2, …; after the last one a notice is marked failed. */
export const NOTICE_RETRY_SCHEDULE_MS = [30_000, 120_000, 600_000, 3_600_000, 21_600_000];
/** How long a claimed notice stays invisible to other senders (a sender that dies mid-send). */
const CLAIM_LEASE_SECONDS = 120;
const BATCH = 20;

export async function queueNotices(tx: Tx, projectId: string, notices: Notice[]): Promise<void> {
  if (!notices.length) return;
  await tx.notice.createMany({
    data: notices.map((n) => ({ id: newId("ntc"), projectId, kind: n.to.kind, value: n.to.value, subject: n.subject, text: n.text })),
  });
}

/** `a•••@example.com`, `+•••••••43`: enough for the owner to recognise, too little to use. */
export function maskIdentifier(i: Recipient): string {
  if (i.kind === "email") {
    const at = i.value.lastIndexOf("@");
    return `${i.value.slice(0, 1)}•••${i.value.slice(at)}`;
  }
  return `+${"•".repeat(Math.max(3, i.value.length - 3))}${i.value.slice(-2)}`;
}

type Claimed = { id: string; kind: Recipient["kind"]; value: string; subject: string; text: string; attempts: number };

/**
 * Due notices, claimed by pushing their next attempt past a lease: SKIP LOCKED lets several
 * processes share the queue without waiting on each other's rows. On the fast path: every
 * change to how an account signs in queues notices, so this runs once per change. $1 lease
 * seconds, $2 batch size.
 */
const CLAIM_NOTICES = prepared<Claimed>(
  "claim_notices",
  { id: "text", kind: "text", value: "text", subject: "text", text: "text", attempts: "int4" },
  `UPDATE notices SET attempts = attempts + 1, next_attempt_at = (now() + make_interval(secs => $1::int)) AT TIME ZONE 'UTC'
    WHERE id IN (
      SELECT id FROM notices WHERE status = 'pending' AND next_attempt_at <= now() AT TIME ZONE 'UTC'
      ORDER BY next_attempt_at LIMIT $2::int FOR UPDATE SKIP LOCKED)
    RETURNING id, kind::text AS kind, value, subject, text, attempts`,
);

async function claimDue(db: Database): Promise<Claimed[]> {
  return run(db, CLAIM_NOTICES, [CLAIM_LEASE_SECONDS, BATCH]);
}

const RECORD_SENT = prepared<{ id: string }>(
  "record_notices_sent",
  { id: "text" },
  `UPDATE notices SET status = 'sent', sent_at = now() AT TIME ZONE 'UTC', last_error = NULL WHERE id = ANY ($1::text[]) RETURNING id`,
);

/** The notices of one batch that went out, in one statement (a change queues several). */
async function recordSent(db: Database, ids: string[]) {
  if (ids.length) await run(db, RECORD_SENT, [ids]);
}

async function recordFailure(db: Db, n: Claimed, error: string, schedule: number[]) {
  const delay = schedule[n.attempts - 1];
  await db.notice.update({
    where: { id: n.id },
    data: delay === undefined ? { status: "failed", lastError: error } : { nextAttemptAt: new Date(Date.now() + delay), lastError: error },
  });
}

export type NoticeSender = { kick(): void; stop(): Promise<void> };

export function startNoticeSender(opts: { db: Database; messenger: Messenger; logger: Logger; scheduleMs?: number[]; pollMs?: number }): NoticeSender {
  const schedule = opts.scheduleMs ?? NOTICE_RETRY_SCHEDULE_MS;
  const pollMs = opts.pollMs ?? 5_000;
  let stopped = false;
  let kicked = false; // a kick during a drain must not be lost
  let wake: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;

  /** Sends one notice; returns the delay until its retry if it failed, "sent" if it went out. */
  async function sendOne(n: Claimed): Promise<number | "sent" | undefined> {
    try {
      await opts.messenger.send({ to: { kind: n.kind, value: n.value }, subject: n.subject, text: n.text });
      return "sent";
    } catch (err) {
      opts.logger.warn({ notice: n.id, attempt: n.attempts, kind: n.kind, err: String(err) }, "notice not sent; will retry");
      await recordFailure(opts.db.prisma, n, String(err).slice(0, 500), schedule);
      return schedule[n.attempts - 1];
    }
  }

  /** Sends everything due; returns how soon a retry of this process's failures falls due. */
  async function drain(): Promise<number> {
    let soonest = pollMs;
    for (;;) {
      const batch = await claimDue(opts.db);
      const results = await Promise.all(batch.map(sendOne));
      await recordSent(opts.db, batch.filter((_, i) => results[i] === "sent").map((n) => n.id));
      for (const retryIn of results) if (typeof retryIn === "number") soonest = Math.min(soonest, retryIn);
      if (batch.length < BATCH || stopped) return soonest;
    }
  }

  const loop = (async () => {
    while (!stopped) {
      kicked = false;
      const sleepMs = await drain().catch((err) => {
        opts.logger.warn({ err: String(err) }, "notice sender: database error; trying again");
        return pollMs;
      });
      if (stopped) break;
      if (kicked) continue;
      await new Promise<void>((resolve) => {
        wake = resolve;
        timer = setTimeout(resolve, sleepMs);
        timer.unref();
      });
      wake = undefined;
    }
  })();

  return {
    kick: () => {
      kicked = true;
      wake?.();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      wake?.();
      await loop;
    },
  };
}
