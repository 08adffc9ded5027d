// Pulling a project's events after a cursor (GraphQL Query.events), so a receiver that was down
// can catch up: the outbox read in order of its sequence, as far back as retention keeps events.
// pullEvents takes the caller as an actor, refuses any key but the project's secret one
// (docs/webhooks.md, "Pulling events") and puts the actor's project in the WHERE clause, so
// another project's events are simply not found.
import { seal, unseal, type MasterKey } from "../crypto.ts";
import type { Database } from "../db/client.ts";
import { requireSecretKey, type KeyActor } from "../deps.ts";
import { CursorExpired, InvalidRequest } from "../errors.ts";

type DbLike = Pick<Database, "prisma">;

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

/** A page's size: at most, and when none is asked for (docs/webhooks.md, "Pulling events"). */
export const MAX_PULL_LIMIT = 100;

/**
 * Opaque to clients, and sealed (AES-256-GCM under the master key, bound to the project): `seq`
 * is one counter for every project's events, so a cursor that showed it (`v1:<seq>`, as before)
 * let a tenant count the events of all the others between two of its own, sign-ups and sign-ins
 * as they happen (22nd review). Base64url, as before.
 */
export function encodeCursor(master: MasterKey, projectId: string, seq: bigint): string {
  return Buffer.from(seal(master, `events-cursor:${projectId}:${seq}`), "utf8").toString("base64url");
}

const MAX_SEQ = 2n ** 63n - 1n; // Postgres bigint

/**
 * The seq a cursor of this project's stands for. A `v1:<seq>` cursor, issued before cursors were
 * sealed, is still taken, so a reader resumes where it stopped (`legacy`: pullEvents checks that
 * it names one of the project's events). Anything else (forged, altered, another project's) is
 * InvalidRequest.
 */
export function decodeCursor(master: MasterKey, projectId: string, cursor: string): { seq: bigint; legacy: boolean } {
  const text = Buffer.from(cursor, "base64url").toString("utf8");
  const legacy = /^v1:(\d{1,19})$/.exec(text);
  const digits = legacy ? legacy[1] : sealedSeq(master, projectId, text);
  const seq = digits === undefined ? -1n : BigInt(digits);
  if (seq < 0n || seq > MAX_SEQ) throw new InvalidRequest("invalid cursor");
  return { seq, legacy: legacy !== null };
}

/**
 * A `v1:<seq>` cursor was always the seq of one of the project's own events (a page's last), so
 * one is taken only when it still names one, or one retention has removed since (then the
 * retention check decides). Any seq was taken before, and which of a project's events came after
 * a made-up seq told the project where its events sat in the sequence every project shares:
 * a binary search of 40 pulls per event counted the other projects' events between two of its own
 * (31st review), as the visible cursors did before they were sealed.
 */
async function assertLegacyCursorIssued(db: DbLike, projectId: string, seq: bigint): Promise<void> {
  const [own, mark] = await Promise.all([
    db.prisma.outboxEvent.findFirst({ where: { projectId, seq, test: false }, select: { id: true } }),
    db.prisma.eventRetention.findUnique({ where: { projectId }, select: { sweptSeq: true } }),
  ]);
  if (!own && !(mark && mark.sweptSeq >= seq)) throw new InvalidRequest("invalid cursor");
}

function sealedSeq(master: MasterKey, projectId: string, text: string): string | undefined {
  let plain: string;
  try {
    plain = unseal(master, text);
  } catch {
    return undefined;
  }
  const m = /^events-cursor:([^:]+):(\d{1,19})$/.exec(plain);
  return m && m[1] === projectId ? m[2] : undefined;
}

/**
 * A project's events in commit-safe `seq` order, after `after` (exclusive), for a receiver
 * catching up. Test events are not included. `first` is 1 to MAX_PULL_LIMIT (default
 * MAX_PULL_LIMIT); outside that, InvalidRequest.
 *
 * The seq of an event is taken when it is inserted, not when its transaction commits, so an
 * event with a lower seq can become visible after a higher one: a reader that had already
 * moved past it would skip it forever. To prevent that, a page ends before the first event
 * that is not older (by a 1 s margin) than the oldest transaction that is still writing to this
 * database; such events are returned by a later call. With no transaction in progress, there is
 * no delay at all. An event's created_at is when it was written (outbox_enqueue,
 * src/webhooks/outbox.sql), as its seq is: stamped with its transaction's start, an event of a
 * transaction that began earlier but wrote later than an open one passed this check, and the
 * open one's event was skipped (docs/webhooks.md, "Pulling events").
 *
 * The pull reaches back as far as the events' retention (LINKGATE_RETENTION_EVENTS_DAYS). A
 * cursor with events after it removed by retention is CursorExpired, never a page with a
 * silent gap. The mark is read after the events, so a sweep committed in between is seen.
 */
export async function pullEvents(
  db: DbLike,
  actor: KeyActor,
  opts: { master: MasterKey; after?: string | null; first?: number | null; retentionDays?: number },
): Promise<EventPage> {
  const { projectId } = requireSecretKey(actor);
  const limit = opts.first ?? MAX_PULL_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PULL_LIMIT) throw new InvalidRequest(`first must be between 1 and ${MAX_PULL_LIMIT}`);
  const after = opts.after ? decodeCursor(opts.master, projectId, opts.after) : { seq: 0n, legacy: false };
  if (after.legacy) await assertLegacyCursorIssued(db, projectId, after.seq);
  const afterSeq = after.seq;
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
    cursor: encodeCursor(opts.master, projectId, r.seq),
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
