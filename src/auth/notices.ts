// Security notices: written in the transaction of the change they announce (an outbox, like
// webhook events) and sent afterwards by a small sender in every gateway process, retried on a
// schedule. A mail server that is down delays a notice and never the change; a restart loses
// nothing, because the schedule lives in each notice's next_attempt_at.
//
// Every notice is a message the operator pays for, so the sender counts each one it sends
// against budgets (docs/security.md, "Message budgets"): per destination, per account, and the
// project's hourly text or e-mail ceiling that codes count against too. Notices a budget
// refuses wait for its window to end and go out then as one message per destination, together
// with everything queued for that destination meanwhile: a burst of changes (or an attacker
// cycling passkeys on an account with many phones) makes a bounded number of texts, and the
// owner still learns of every kind of change. The budgets are counted here, when a message is
// actually sent, so they hold for every writer of the queue (link_verify writes notices in SQL).

import type { Database, Db, Tx } from "../db/client.ts";
import type { NoticeSender } from "../deps.ts";
import { prepared, run } from "../db/fast.ts";
import { transaction } from "../db/transaction.ts";
import type { Limit, Limits } from "../limits.ts";
import { newId } from "../ids.ts";
import type { Logger } from "../log.ts";
import { recordRateLimitRefusal, type RateLimitName } from "../metrics.ts";
import { countMessages, type Check, type Counter, type Message } from "../rate-limit.ts";
import { enqueue } from "../webhooks/outbox.ts";
import type { Messenger, Recipient } from "../messaging/transport.ts";

export type Notice = { to: Recipient; subject: string; text: string };
/** The budgets the sender counts notices against (src/limits.ts). */
export type NoticeLimits = Pick<Limits, "noticesPerDestination" | "noticesPerAccount" | "smsPerProject" | "emailsPerProject">;

/** How long a claimed notice stays invisible to other senders (a sender that dies mid-send). */
const CLAIM_LEASE_SECONDS = 120;
/**
 * Destinations (at most) a claim starts from, so (at most) the messages sent at once. One
 * sender per process keeps up with a process's changes only if a claim takes what arrived
 * meanwhile: with 20, behind 16 concurrent link flows in the link benchmark, it fell seconds
 * behind (1,800 destinations due) and every claim read the backlog.
 */
const BATCH = 100;
/** Due notices a claim looks through (and so takes) at most, however many a budget held for its destinations. */
const MAX_CLAIMED = 1_000;
/** At most this many changes are spelled out in a gathered message; the rest are counted. */
const SPELLED_OUT = 3;

/**
 * `accountId`: the account the change was made to, whose notice budget they count against. Due
 * at once by the database's clock, which the claim reads: Prisma's default now() is this
 * gateway's clock, and one running ahead held every notice of its changes back by as much
 * (docs/operations.md, "Clocks").
 */
export async function queueNotices(tx: Tx, projectId: string, notices: Notice[], accountId?: string): Promise<void> {
  if (!notices.length) return;
  await tx.$executeRaw`
    INSERT INTO notices (id, project_id, account_id, kind, value, subject, text, next_attempt_at, created_at)
    SELECT n.id, ${projectId}, ${accountId ?? null}, n.kind::identifier_kind, n.value, n.subject, n.text, now() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC'
    FROM unnest(${notices.map(() => newId("ntc"))}::text[], ${notices.map((n) => n.to.kind)}::text[], ${notices.map((n) => n.to.value)}::text[],
                ${notices.map((n) => n.subject)}::text[], ${notices.map((n) => n.text)}::text[]) AS n(id, kind, value, subject, text)`;
}

/** A gathered message's length at most: seven concatenated text segments of GSM-7, as texted (src/messaging/transport.ts smsText). */
export const MAX_GATHERED_LENGTH = 1_000;

/**
 * One message for several notices to one destination. A notice's text starts with its subject
 * line (texts have none) and ends with what to do; the gathered message names every distinct
 * subject (so no kind of change goes unmentioned), spells out the first changes and counts the
 * rest, and stays within MAX_GATHERED_LENGTH however many changes there were and of whatever
 * kinds: the advice of changes not spelled out is one general line (each attach's advice names
 * its own identifier, so theirs would grow with the changes), and spelled-out changes are
 * dropped from the last while the message is too long.
 */
export function gatherNotices(notices: Array<{ subject: string; text: string }>): { subject: string; text: string } {
  if (notices.length === 1) return notices[0];
  const subjects = [...new Set(notices.map((n) => n.subject))];
  const subject = subjects.map((s, i) => (i ? s[0].toLowerCase() + s.slice(1) : s)).join("; ");
  const body = (text: string) => text.split("\n").filter((line, i) => i > 0 && !line.startsWith("If ")).join("\n");
  const adviceOf = (n: { text: string }) => n.text.split("\n").filter((line) => line.startsWith("If it was not you"));
  const compose = (spelled: number) => {
    const shown = notices.slice(0, spelled);
    const advice = [...new Set(shown.flatMap(adviceOf))];
    const more = notices.length - spelled;
    return [
      `${notices.length} changes were made to your account: ${subject}.`,
      ...shown.map((n) => body(n.text)),
      ...(more > 0 ? [`…and ${more} more ${more === 1 ? "change" : "changes"}.`] : []),
      "If this was you, there is nothing to do.",
      ...advice,
      ...(more > 0 ? ["If any other change was not you: sign in, end your other sessions, and undo it in your account."] : []),
    ].join("\n");
  };
  let spelled = Math.min(SPELLED_OUT, notices.length);
  let text = compose(spelled);
  while (text.length > MAX_GATHERED_LENGTH && spelled > 0) text = compose(--spelled);
  return { subject, text };
}

/** `a•••@example.com`, `+•••••••43`: enough for the owner to recognise, too little to use. */
export function maskIdentifier(i: Recipient): string {
  if (i.kind === "email") {
    const at = i.value.lastIndexOf("@");
    return `${i.value.slice(0, 1)}•••${i.value.slice(at)}`;
  }
  return `+${"•".repeat(Math.max(3, i.value.length - 3))}${i.value.slice(-2)}`;
}

type Claimed = {
  id: string;
  project_id: string;
  account_id: string | null;
  kind: Recipient["kind"];
  value: string;
  subject: string;
  text: string;
  attempts: number;
  /** when it was queued, in ms: a gathered message spells out the first changes first */
  created_ms: number;
};

/**
 * Due notices, claimed by pushing their next attempt past a lease: SKIP LOCKED lets several
 * processes share the queue without waiting on each other's rows. Whole destinations are
 * claimed: every due notice of each destination among the first $2 due ones, so what a budget
 * held for a destination is sent as one message when it falls due; both are looked for among
 * the first $3 due notices only (one ordered read of notices_due_idx). A claim that looked
 * through every due notice cost as much as the backlog (a sender behind a burst, a mail server
 * down), and a sender slowed by it fell further behind: in the link benchmark, 6 to 20 ms and
 * 7,000 to 37,000 buffers a claim, against under 1 ms and 500 buffers now (bench/RESULTS.md).
 * A row is locked only if its next attempt and attempts are still the ones read, so a row
 * another sender claimed meanwhile is skipped (and the lock cannot be planned as a read of the
 * whole due index, which the pending notices' partial index would otherwise allow).
 * On the fast path: every change to how an account signs in queues notices, so this runs once
 * per change. A notice written without its account (link_verify writes them in SQL) counts
 * against the account its destination signs into: a merged secondary's address against the
 * primary, whose change it announces. Read as the address's own account, the secondary's
 * addresses had a budget of their own, and a merged account's addresses were told 20 notices
 * an hour twice over (docs/security.md, "Message budgets"). $1 lease seconds.
 */
const CLAIM_NOTICES = prepared<Claimed>(
  "claim_notices",
  { id: "text", project_id: "text", account_id: "text", kind: "text", value: "text", subject: "text", text: "text", attempts: "int4", created_ms: "float8" },
  `WITH due AS (
      SELECT id, next_attempt_at, attempts, min(pos) OVER (PARTITION BY project_id, kind, value) AS first_pos
      FROM (SELECT *, row_number() OVER (ORDER BY next_attempt_at) AS pos
            FROM (SELECT id, project_id, kind, value, next_attempt_at, attempts FROM notices
                  WHERE status = 'pending' AND next_attempt_at <= now() AT TIME ZONE 'UTC'
                  ORDER BY next_attempt_at LIMIT $3::int) first_due) numbered
    ), taken AS (
      SELECT n.id FROM due d
      JOIN notices n ON n.id = d.id AND n.next_attempt_at = d.next_attempt_at AND n.attempts = d.attempts
      WHERE d.first_pos <= $2::int
      FOR UPDATE OF n SKIP LOCKED
    )
    UPDATE notices SET attempts = attempts + 1, next_attempt_at = (now() + make_interval(secs => $1::int)) AT TIME ZONE 'UTC'
    WHERE id IN (SELECT id FROM taken)
    RETURNING id, project_id,
      coalesce(account_id, (SELECT CASE WHEN a.merge_role = 'secondary' THEN a.merged_with_id ELSE a.id END
                            FROM identifiers i JOIN accounts a ON a.id = i.account_id
                            WHERE i.project_id = notices.project_id AND i.kind = notices.kind AND i.value = notices.value)) AS account_id,
      kind::text AS kind, value, subject, text, attempts, (extract(epoch FROM created_at) * 1000)::float8 AS created_ms`,
);

async function claimDue(db: Database): Promise<Claimed[]> {
  return run(db, CLAIM_NOTICES, [CLAIM_LEASE_SECONDS, BATCH, MAX_CLAIMED]);
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

const POSTPONE = prepared<{ id: string }>(
  "postpone_notices",
  { id: "text" },
  `UPDATE notices SET attempts = attempts - 1, next_attempt_at = (now() + make_interval(secs => w.seconds)) AT TIME ZONE 'UTC'
    FROM unnest($1::text[], $2::int[]) AS w(id, seconds)
    WHERE notices.id = w.id RETURNING notices.id`,
);

/**
 * Notices a budget refused wait for its window to end; the claim's attempt is given back, as
 * none was made. Every held notice of a batch in one statement: once a budget is spent, most
 * destinations of a batch are held, and one statement each was a statement per change.
 */
async function postpone(db: Database, held: Array<{ ids: string[]; seconds: number }>) {
  if (!held.length) return;
  const ids = held.flatMap((h) => h.ids);
  await run(db, POSTPONE, [ids, held.flatMap((h) => h.ids.map(() => h.seconds))]);
}

/**
 * A failed notice waits its delay by the database's clock, which the claim reads
 * (docs/operations.md, "Clocks"): added to this gateway's clock, one running behind wrote a retry
 * already due, and a failing transport was tried again at once.
 */
async function recordFailure(db: Db, n: Claimed, error: string, schedule: number[]) {
  const delay = schedule[n.attempts - 1];
  if (delay === undefined) {
    await db.notice.update({ where: { id: n.id }, data: { status: "failed", lastError: error } });
    return;
  }
  await db.$executeRaw`
    UPDATE notices SET next_attempt_at = (now() + make_interval(secs => ${delay / 1000}::float8)) AT TIME ZONE 'UTC', last_error = ${error}
    WHERE id = ${n.id}`;
}

export type { NoticeSender };

const budgetKeys = {
  destination: (n: Claimed) => `ntc:dst:${n.project_id}:${n.kind}:${n.value}`,
  account: (accountId: string) => `ntc:acc:${accountId}`,
  /**
   * The project's ceiling for notices, as large as its ceiling for codes but counted apart:
   * shared, strangers' code sends to addresses of their own filled it, and a thief's changes to
   * an account were told to its owner an hour late (twelfth review).
   */
  project: (n: Claimed) => `ntc:prj:${n.project_id}:${n.kind}`,
};

function refusalName(key: string): RateLimitName | undefined {
  if (key.startsWith("ntc:dst:")) return "notices_per_destination";
  if (key.startsWith("ntc:acc:")) return "notices_per_account";
  if (key.startsWith("ntc:prj:")) return key.endsWith(":phone") ? "notice_sms_per_project" : "notice_emails_per_project";
  return undefined;
}

type SenderOptions = {
  db: Database;
  messenger: Messenger;
  logger: Logger;
  limits: NoticeLimits;
  /** Delays before retries 1, 2, …; after the last one a notice is marked failed (LINKGATE_NOTICE_RETRY_SCHEDULE_MS). */
  scheduleMs: number[];
  pollMs?: number;
};

/** What the sender's parts share: the options, with their defaults filled in. */
type Sender = Required<SenderOptions>;

/**
 * What one message to a destination counts against: its destination's budget, the budget of
 * each account its notices are about, and the project's ceiling when those allow it.
 */
function messageChecks(s: Sender, group: Claimed[]): Message {
  const first = group[0];
  const l = s.limits;
  const count: Check[] = [{ key: budgetKeys.destination(first), limit: l.noticesPerDestination }];
  for (const accountId of new Set(group.flatMap((n) => (n.account_id ? [n.account_id] : [])))) {
    count.push({ key: budgetKeys.account(accountId), limit: l.noticesPerAccount });
  }
  const ceiling: Limit = first.kind === "phone" ? l.smsPerProject : l.emailsPerProject;
  return { count, ceiling: { key: budgetKeys.project(first), limit: ceiling } };
}

/** The first refusal of the project's ceiling in its window tells the project, as a code send's does. */
async function alarm(s: Sender, group: Claimed[], counters: Counter[]) {
  const tripped = counters.find((c) => c.tripped && c.key.startsWith("ntc:prj:"));
  if (!tripped) return;
  await transaction(s.db.prisma, (tx) =>
    enqueue(tx, {
      projectId: group[0].project_id,
      eventType: "security.suspicious_activity",
      data: { reason: "send_ceiling_per_project", channel: group[0].kind, retry_after_seconds: tripped.resetsIn },
    }),
  );
}

/** Held: a budget refused the message; its notices wait this long for the window to end, and are sent together then. */
type Held = { heldFor: number };

/** A budget refused the message: counted and logged here, postponed with the rest of the batch. */
async function hold(s: Sender, group: Claimed[], counters: Counter[]): Promise<Held> {
  const over = counters.filter((c) => c.over);
  for (const c of over) {
    const name = refusalName(c.key);
    if (name) recordRateLimitRefusal(name);
  }
  await alarm(s, group, counters);
  const waitSeconds = Math.max(...over.map((c) => c.resetsIn));
  s.logger.info({ notices: group.length, kind: group[0].kind, waitSeconds }, "notices held by their budget");
  return { heldFor: waitSeconds };
}

/**
 * Sends the notices of one destination as one message, if its budgets allow; returns the
 * delay until a retry if it failed, "sent" if it went out, how long to hold it if a budget refused it.
 */
async function sendGroup(s: Sender, group: Claimed[], counters: Counter[]): Promise<number | "sent" | Held | undefined> {
  if (counters.some((c) => c.over)) return hold(s, group, counters);
  const { subject, text } = gatherNotices(group);
  try {
    await s.messenger.send({ to: { kind: group[0].kind, value: group[0].value }, subject, text });
    return "sent";
  } catch (err) {
    s.logger.warn({ notices: group.map((n) => n.id), attempt: group[0].attempts, kind: group[0].kind, err: String(err) }, "notice not sent; will retry");
    for (const n of group) await recordFailure(s.db.prisma, n, String(err).slice(0, 500), s.scheduleMs);
    return s.scheduleMs[group[0].attempts - 1];
  }
}

/** What to postpone for one destination's group: its notices, if a budget held them. */
function toPostpone(group: Claimed[], result: Awaited<ReturnType<typeof sendGroup>>) {
  return typeof result === "object" ? [{ ids: group.map((n) => n.id), seconds: result.heldFor }] : [];
}

/** The claimed notices by destination, in the order they were claimed. */
function byDestination(batch: Claimed[]): Claimed[][] {
  const groups = new Map<string, Claimed[]>();
  for (const n of batch) {
    const key = `${n.project_id}\n${n.kind}\n${n.value}`;
    groups.set(key, [...(groups.get(key) ?? []), n]);
  }
  return [...groups.values()].map((g) => g.sort((a, b) => a.created_ms - b.created_ms));
}

/** Sends everything due; returns how soon a retry of this process's failures falls due. */
async function drain(s: Sender, stopped: () => boolean): Promise<number> {
  let soonest = s.pollMs;
  for (;;) {
    const batch = await claimDue(s.db);
    const groups = byDestination(batch);
    // every message of the batch counted in one statement, in the order they were claimed
    const counted = await countMessages(s.db, groups.map((g) => messageChecks(s, g)));
    const results = await Promise.all(groups.map((g, i) => sendGroup(s, g, counted[i])));
    await recordSent(s.db, groups.flatMap((g, i) => (results[i] === "sent" ? g.map((n) => n.id) : [])));
    await postpone(s.db, groups.flatMap((g, i) => toPostpone(g, results[i])));
    for (const retryIn of results) if (typeof retryIn === "number") soonest = Math.min(soonest, retryIn);
    // Held notices are no longer due, so a claim short of BATCH rows took every notice due
    // when it ran (its inner LIMIT counted all of them): no second claim to find nothing, a
    // statement per change saved. Notices queued since kicked this sender and are drained next.
    if (batch.length < BATCH || stopped()) return soonest;
  }
}

/** Drains now, then whenever kicked or a retry falls due, until stopped. */
export function startNoticeSender(opts: SenderOptions): NoticeSender {
  const s: Sender = { ...opts, pollMs: opts.pollMs ?? 5_000 };
  let stopped = false;
  let kicked = false; // a kick during a drain must not be lost
  let wake: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;

  const loop = (async () => {
    while (!stopped) {
      kicked = false;
      const sleepMs = await drain(s, () => stopped).catch((err) => {
        s.logger.warn({ err: String(err) }, "notice sender: database error; trying again");
        return s.pollMs;
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
