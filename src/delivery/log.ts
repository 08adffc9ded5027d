// The delivery log as a service for the API: pulling events, the headers an attempt sent, and
// the periodic disabling of dead webhooks. Sending a delivery again is src/delivery/redelivery.ts.
//
// Every function that serves a caller takes the caller's projectId and puts it in the WHERE
// clause of every statement, so another project's rows are simply not found (and reported as
// DeliveryNotFound / WebhookNotFound, never as "forbidden", which would confirm they exist).
import { unseal, type MasterKey } from "../crypto.ts";
import type { Database } from "../db/client.ts";
import { CursorExpired, InvalidRequest } from "../errors.ts";
import { requestHeaders, secretRef } from "./sender.ts";

type DbLike = Pick<Database, "prisma">;

// ---- pulling events --------------------------------------------------------------------------

export type PulledEvent = {
  id: string;
  eventType: string;
  createdAt: Date;
  /** The exact envelope bytes a webhook receives. */
  body: string;
  /** Resume after this event. */
  cursor: string;
};

export type EventPage = {
  events: PulledEvent[];
  /** Pass as `after` for the next page; the input cursor again when the page is empty. */
  endCursor: string | null;
  hasMore: boolean;
};

export const MAX_PULL_LIMIT = 500;

/** Opaque to clients; `v1:<seq>` in base64url so the format can change without breaking them. */
export function encodeCursor(seq: bigint): string {
  return Buffer.from(`v1:${seq}`, "utf8").toString("base64url");
}

const MAX_SEQ = 2n ** 63n - 1n; // Postgres bigint

export function decodeCursor(cursor: string): bigint {
  const m = /^v1:(\d{1,19})$/.exec(Buffer.from(cursor, "base64url").toString("utf8"));
  const seq = m ? BigInt(m[1]) : -1n;
  if (seq < 0n || seq > MAX_SEQ) throw new InvalidRequest("invalid cursor");
  return seq;
}

/**
 * A project's events in commit-safe `seq` order, after `after` (exclusive), for a receiver
 * catching up. Test events are not included. `limit` is clamped to 1…500 (default 100).
 *
 * The seq of an event is taken when it is inserted, not when its transaction commits, so an
 * event with a lower seq can become visible after a higher one: a reader that had already
 * moved past it would skip it forever. To prevent that, a page ends before the first event
 * that is not older (by a 1 s margin) than the oldest transaction that is still writing to this
 * database; such events are returned by a later call. With no transaction in progress, there is
 * no delay at all.
 *
 * The pull reaches back as far as the events' retention (LINKGATE_RETENTION_EVENTS_DAYS). A
 * cursor with events after it removed by retention is CursorExpired, never a page with a
 * silent gap. The mark is read after the events, so a sweep committed in between is seen.
 */
export async function pullEvents(
  db: DbLike,
  projectId: string,
  opts: { after?: string | null; limit?: number; retentionDays?: number } = {},
): Promise<EventPage> {
  const afterSeq = opts.after ? decodeCursor(opts.after) : 0n;
  const limit = Math.min(MAX_PULL_LIMIT, Math.max(1, Math.floor(opts.limit ?? 100)));
  const horizon = await writeHorizon(db);
  const rows = await db.prisma.outboxEvent.findMany({
    where: { projectId, test: false, seq: { gt: afterSeq } },
    orderBy: { seq: "asc" },
    take: limit + 1,
    select: { id: true, seq: true, eventType: true, createdAt: true, body: true },
  });
  if (opts.after) await assertCursorKept(db, projectId, afterSeq, opts.retentionDays);
  let hasMore = rows.length > limit;
  const page = rows.slice(0, limit);
  const safe = horizon === null ? page.length : page.findIndex((r) => r.createdAt.getTime() >= horizon);
  const events = (safe === -1 ? page : page.slice(0, safe)).map((r) => ({
    id: r.id,
    eventType: r.eventType,
    createdAt: r.createdAt,
    body: r.body,
    cursor: encodeCursor(r.seq),
  }));
  if (events.length < page.length) hasMore = true;
  return { events, endCursor: events.at(-1)?.cursor ?? opts.after ?? null, hasMore };
}

/** Throws CursorExpired when retention has removed one of the project's events after `afterSeq`. */
async function assertCursorKept(db: DbLike, projectId: string, afterSeq: bigint, retentionDays?: number): Promise<void> {
  const mark = await db.prisma.eventRetention.findUnique({ where: { projectId }, select: { sweptSeq: true } });
  if (!mark || mark.sweptSeq <= afterSeq) return;
  const reach = retentionDays ? ` (${retentionDays} days)` : "";
  throw new CursorExpired(
    `that cursor is older than the events' retention${reach}: events after it have been removed; pull again without \`after\` to read from the oldest event kept`,
  );
}

/**
 * Events created at or after this time (ms) may still be joined by lower-seq events from
 * transactions in progress; null when nothing else is writing. Reads pg_stat_activity, which
 * shows the sessions of the same role (or all, with pg_read_all_stats); PGlite has one session.
 */
async function writeHorizon(db: DbLike): Promise<number | null> {
  try {
    const rows = await db.prisma.$queryRaw<{ started: Date | null }[]>`
      SELECT min(xact_start) AS started FROM pg_stat_activity
      WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid() AND datname = current_database()`;
    const started = rows[0]?.started;
    return started ? started.getTime() - 1_000 : null;
  } catch {
    return null;
  }
}

// ---- the headers an attempt sent ---------------------------------------------------------------

type AttemptSource = {
  id: string;
  attempt: number;
  started_at: Date;
  signed_with: string | null;
  request_headers: Record<string, string> | null;
  event_id: string;
  event_type: string;
  body: string;
  secret_sealed: string;
  previous_secret_sealed: string | null;
};

/** In place of a signature made with a secret the webhook no longer holds (rotated out since). */
export const SIGNATURE_NOT_SHOWN = "(not shown: signed with a secret this webhook no longer holds)";

/**
 * The request headers of attempts of one project's deliveries, for display, by attempt id.
 * Attempts store only which secrets signed (signed_with): the headers are a function of the
 * body, the event, the attempt number, the start time (the signature timestamp) and those
 * secrets, so they are rebuilt here, byte for byte what was sent as long as the webhook still
 * holds the secrets (a signature by a secret rotated out since shows SIGNATURE_NOT_SHOWN).
 * Attempts logged before that column keep the headers they stored; one that made no request
 * has none ({}). Ids of other projects are not found (absent from the map).
 */
export async function attemptRequestHeaders(
  db: DbLike,
  masterKey: MasterKey,
  projectId: string,
  attemptIds: readonly string[],
): Promise<Map<string, Record<string, string>>> {
  const ids = [...new Set(attemptIds)];
  if (ids.length === 0) return new Map();
  const rows = await db.prisma.$queryRaw<AttemptSource[]>`
    SELECT a.id, a.attempt, a.started_at, a.signed_with, a.request_headers, d.event_id, d.event_type, e.body,
           w.secret_sealed, w.previous_secret_sealed
    FROM delivery_attempts a
    JOIN deliveries d ON d.id = a.delivery_id
    JOIN outbox_events e ON e.id = d.event_id
    JOIN webhooks w ON w.id = d.webhook_id
    WHERE a.id = ANY (${ids}::text[]) AND d.project_id = ${projectId}`;
  const secrets = new Map<string, string>(); // ref -> secret, of the webhooks involved
  for (const r of rows) {
    for (const sealed of [r.secret_sealed, r.previous_secret_sealed]) {
      if (!sealed) continue;
      const plain = unseal(masterKey, sealed);
      secrets.set(secretRef(plain), plain);
    }
  }
  return new Map(rows.map((r) => [r.id, r.request_headers ?? (r.signed_with ? rebuiltHeaders(r, r.signed_with.split(" "), secrets) : {})]));
}

function rebuiltHeaders(r: AttemptSource, refs: string[], secrets: Map<string, string>): Record<string, string> {
  // A secret no longer held is stood in for by a throw-away one, whose signatures are then blanked.
  const standIn = "whsec_" + Buffer.alloc(32).toString("base64");
  const [current, previous] = refs.map((ref) => secrets.get(ref) ?? null);
  const headers = requestHeaders({
    body: r.body,
    eventId: r.event_id,
    eventType: r.event_type,
    attempt: r.attempt,
    timestamp: Math.floor(r.started_at.getTime() / 1000),
    secrets: { current: current ?? standIn, previous: refs.length > 1 ? (previous ?? standIn) : null },
  });
  const entries = headers["webhook-signature"].split(" ");
  if (!current) {
    headers["X-Service-Signature"] = SIGNATURE_NOT_SHOWN;
    entries[0] = SIGNATURE_NOT_SHOWN;
  }
  if (refs.length > 1 && !previous) {
    headers["X-Service-Signature-Previous"] = SIGNATURE_NOT_SHOWN;
    entries[1] = SIGNATURE_NOT_SHOWN;
  }
  headers["webhook-signature"] = entries.join(" ");
  return headers;
}

// ---- disabling dead webhooks -------------------------------------------------------------------

export type DisabledWebhook = { webhookId: string; projectId: string; failingSince: Date; reason: string };

/**
 * Disables every enabled webhook whose deliveries have all failed for 24 hours: it has failed
 * attempts in the last 24 hours, no successful attempt (200/201/202) in that time, and its
 * unbroken run of failures began at least 24 hours before `now`. Attempts of the last 3 days
 * are considered (so a webhook with no traffic for days is not judged on ancient failures).
 * Sets disabledReason, marks its pending deliveries that no worker holds as `failed` (they can
 * be replayed with replayFailed once it works again), and returns what it disabled; the caller
 * logs the `webhook.disabled` notice. Idempotent and safe to run from every worker at once.
 */
export async function disableDeadWebhooks(db: DbLike, now: Date = new Date()): Promise<DisabledWebhook[]> {
  const at = now.toISOString();
  const rows = await db.prisma.$queryRaw<{ id: string; project_id: string; failing_since: Date; reason: string }[]>`
    WITH att AS (
      SELECT d.webhook_id, a.started_at, coalesce(a.status_code IN (200, 201, 202), false) AS ok
      FROM webhooks w
      JOIN deliveries d ON d.webhook_id = w.id AND d.created_at >= ${at}::timestamptz - interval '3 days'
      JOIN delivery_attempts a ON a.delivery_id = d.id
      WHERE w.enabled
        AND a.started_at >= ${at}::timestamptz - interval '3 days' AND a.started_at <= ${at}::timestamptz
    ),
    last_ok AS (
      SELECT webhook_id, max(started_at) AS at FROM att WHERE ok GROUP BY webhook_id
    ),
    dead AS (
      SELECT att.webhook_id, min(att.started_at) AS failing_since
      FROM att LEFT JOIN last_ok USING (webhook_id)
      WHERE NOT att.ok AND att.started_at > coalesce(last_ok.at, '-infinity'::timestamp)
      GROUP BY att.webhook_id
      HAVING min(att.started_at) <= ${at}::timestamptz - interval '24 hours'
         AND max(att.started_at) >= ${at}::timestamptz - interval '24 hours'
    ),
    disabled AS (
      UPDATE webhooks w
      SET enabled = false, updated_at = now(),
          disabled_reason = 'every delivery attempt failed for 24 hours (failing since '
                            || to_char(dead.failing_since, 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ')'
      FROM dead
      WHERE w.id = dead.webhook_id AND w.enabled
      RETURNING w.id, w.project_id, dead.failing_since, w.disabled_reason AS reason
    ),
    abandoned AS (
      UPDATE deliveries
      SET status = 'failed', completed_at = now(), last_error = 'webhook disabled: every delivery attempt failed for 24 hours'
      WHERE webhook_id IN (SELECT id FROM disabled) AND status = 'pending'
        AND (lease_until IS NULL OR lease_until <= now())
    )
    SELECT id, project_id, failing_since, reason FROM disabled`;
  return rows.map((r) => ({ webhookId: r.id, projectId: r.project_id, failingSince: r.failing_since, reason: r.reason }));
}
