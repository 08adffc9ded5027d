// Retention: nothing in linkgate grows for ever. Expired OTP states, WebAuthn challenges,
// rate-limit windows, OpenID Connect codes and tokens, and ended or expired sessions go within minutes; events (with their
// deliveries) after LINKGATE_RETENTION_EVENTS_DAYS, their deliveries still pending then first
// marked failed (expired), delivery attempts (the delivery log) after
// LINKGATE_RETENTION_DELIVERY_LOG_DAYS, settled notices after the events' retention, known
// sign-in places 30 days after their last sign-in (they count for nothing after that).
//
// Why batched deletes and not partitions: at 100 events/s fanned out to 3 webhooks, a day is
// ~26 M delivery and attempt rows; dropping day partitions would be cheaper per row, but the
// delivery claim walks a partial index per webhook (deliveries_webhook_due_idx) that partitioning
// would split into one index per partition, and PGlite and Postgres would need partition
// maintenance in migrations. Deleting in batches of BATCH rows by primary key keeps every lock
// short and on rows nobody else wants (a batch is one statement: at most 489 ms in the soak,
// on a loaded machine), so claims never wait behind a sweep, and the per-run bound keeps one run
// from monopolising the database; the next run continues. bench/soak.ts measures it (30 days:
// sizes flat, the claim's pages unchanged); docs/operations.md has the numbers.
import { Counter, Gauge } from "prom-client";
import type { Database, Db } from "../db/client.ts";
import { Prisma } from "../generated/prisma/client.ts";
import type { Logger } from "../log.ts";
import { metrics } from "../metrics.ts";
import { leaseFree } from "../delivery/pending.ts";
import { KNOWN_FOR_DAYS } from "../rate-limit.ts";

/** Rows per DELETE statement. */
const BATCH = 2_000;
/** Batches per table per run: a run removes at most BATCH × MAX_BATCHES rows of a table. */
const MAX_BATCHES = 50;
/** Expired rows wait this long before they go (a client retrying a verify just after expiry gets a clean answer). */
const GRACE_SECONDS = 60;
/** Any value shared by every linkgate process: only one sweeps at a time. */
const ADVISORY_LOCK = 0x6c6b6774; // "lkgt"

export type RetentionSettings = {
  eventsDays: number;
  deliveryLogDays: number;
  /** How often startSweeper sweeps (default 60); 0: never in this process, others sweep. */
  sweepSeconds?: number;
};

/** The sweep's clock (now(), or a fixed time: bench/soak.ts) and the retention settings. */
type Horizon = { now: Prisma.Sql; eventsDays: number; deliveryLogDays: number };

const NOW = Prisma.sql`now()`;
/** How long a delivery of an enabled webhook may stay due, unsent, before its event's retention ends it: longer than any wait a worker keeps a due delivery for (a breaker's longest open time, a minute by default). */
const STALLED_AFTER = Prisma.raw(`interval '1 hour'`);
/** A constant of this module, written into the text like BATCH; the settings are bound values. */
const GRACE = Prisma.raw(`interval '${GRACE_SECONDS} seconds'`);
const pastExpiry = (h: Horizon) => Prisma.sql`expires_at < ${h.now} - ${GRACE}`;

/**
 * What each table keeps: the rows its `where` matches go, `key` picks them. A fixed set: the
 * table and key names are these constants, every setting is a bound value. A pending delivery
 * is never removed: an event goes only when none of its deliveries is pending (its deliveries
 * and their attempts go with it, by cascade); expireStalled ends the pending ones first.
 */
const TARGETS = {
  otp_states: { key: "id", where: pastExpiry },
  webauthn_challenges: { key: "challenge", where: pastExpiry },
  // a counter's newest slice leaves it a window and a quarter after it began (src/rate-limit.sql)
  rate_limits: { key: "key", where: (h) => Prisma.sql`window_start + make_interval(secs => window_seconds * 1.25) < ${h.now} - ${GRACE}` },
  // Ended or expired, whichever came first: least() skips a NULL ended_at, and the expression
  // is the one `sessions_gone_at_idx` indexes (migration 20261125230000), so a run that finds
  // nothing reads a few index pages instead of every live session. The OR of the two columns
  // it replaces could use no index: 1,000,000 live sessions cost 100 ms a minute.
  sessions: { key: "id", where: (h) => Prisma.sql`least(ended_at, expires_at) < ${h.now} - ${GRACE}` },
  delivery_attempts: { key: "id", where: (h) => Prisma.sql`started_at < ${h.now} - make_interval(days => ${h.deliveryLogDays}::int)` },
  outbox_events: {
    key: "id",
    where: (h) => Prisma.sql`created_at < ${h.now} - make_interval(days => ${h.eventsDays}::int)
        AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = outbox_events.id AND d.status = 'pending')`,
  },
  // through `notices_settled_created_idx` (migration 20261125230001), which holds settled notices only
  notices: { key: "id", where: (h) => Prisma.sql`status <> 'pending' AND created_at < ${h.now} - make_interval(days => ${h.eventsDays}::int)` },
  known_sign_ins: { key: "id", where: (h) => Prisma.sql`last_at < ${h.now} - make_interval(days => ${KNOWN_FOR_DAYS}::int)` },
  // The OpenID Connect provider's codes, refresh tokens, grants and interactions: it ignores
  // expired ones, so they only need to go (rows without an expiry live as long as their session).
  oidc_payloads: { key: "id", where: pastExpiry },
  // external sign-ins and links in progress (docs/external-identities.md): 10 minutes each
  external_flows: { key: "id", where: pastExpiry },
} satisfies Record<string, { key: string; where: (h: Horizon) => Prisma.Sql }>;

type Table = keyof typeof TARGETS;

/** Every table the sweep removes rows from, in the order it sweeps them (the metric's label values). */
export const SWEPT_TABLES = Object.keys(TARGETS) as Table[];

/** The statement that picks one batch of a table's expired rows. */
function pickOf(table: Table, h: Horizon): Prisma.Sql {
  const { key, where } = TARGETS[table];
  return Prisma.sql`SELECT ${Prisma.raw(key)} FROM ${Prisma.raw(table)} WHERE ${where(h)} LIMIT ${Prisma.raw(String(BATCH))}`;
}

/** Each table's statement that picks one batch of its expired rows (test/ops.retention-indexes.test.ts checks their plans). */
export function sweepPicks(settings: RetentionSettings): Array<{ table: Table; pick: Prisma.Sql }> {
  const h = { now: NOW, ...settings };
  return SWEPT_TABLES.map((table) => ({ table, pick: pickOf(table, h) }));
}

/**
 * The deliveries still pending whose event has reached the events' retention, that no worker
 * holds and none is about to send: their webhook is disabled (by its project), or they have
 * been due for over STALLED_AFTER without being sent (a breaker held open while a rare success
 * keeps the webhook from being disabled: docs/webhooks.md). Left pending they would keep their
 * events, and the events their deliveries, for ever. One redelivered near the edge, or waiting
 * for a later attempt (a long retry schedule, Retry-After), is left to be sent (twentieth
 * review). Found from the old end of the events (outbox_events_created_at_idx, then each
 * event's deliveries): once the sweep has caught up, the events it reads there are exactly
 * those its deletes had to leave.
 */
function stalledPick(h: Horizon): Prisma.Sql {
  return Prisma.sql`SELECT d.id FROM outbox_events e
      JOIN deliveries d ON d.event_id = e.id
      JOIN webhooks w ON w.id = d.webhook_id
    WHERE e.created_at < ${h.now} - make_interval(days => ${h.eventsDays}::int)
      AND d.status = 'pending' AND ${Prisma.raw(leaseFree("d"))}
      AND (NOT w.enabled OR d.next_attempt_at < ${h.now} - ${STALLED_AFTER})
    LIMIT ${Prisma.raw(String(BATCH))}`;
}

/** The statement that picks one batch of stalled deliveries (test/ops.retention-indexes.test.ts checks its plan). */
export function stalledDeliveriesPick(settings: RetentionSettings): Prisma.Sql {
  return stalledPick({ now: NOW, ...settings });
}

/**
 * Ends one batch of stalled deliveries as `failed`, as disabling a dead webhook does
 * (src/delivery/dead-webhooks.ts), so the dashboard's counts follow; the status and the lease
 * are checked again on the locked row, in case a worker took one meanwhile. Returns how many.
 */
async function expireStalled(db: Db, h: Horizon): Promise<number> {
  const reason = "expired: still pending after the events' retention (" + h.eventsDays + " days)";
  return db.$executeRaw`
    UPDATE deliveries d
    SET status = 'failed', completed_at = now(), last_error = ${reason}
    WHERE d.id IN (${stalledPick(h)}) AND d.status = 'pending' AND ${Prisma.raw(leaseFree("d"))}`;
}

/** Deletes one batch of a table's expired rows; returns how many went. */
async function deleteBatch(db: Db, table: Table, h: Horizon): Promise<number> {
  const pick = pickOf(table, h);
  if (table === "outbox_events") return deleteEvents(db, pick);
  return db.$executeRaw`DELETE FROM ${Prisma.raw(table)} WHERE ${Prisma.raw(TARGETS[table].key)} IN (${pick})`;
}

/**
 * Events go with a mark, in the same statement: per project, the highest seq removed
 * (event_retention). The events pull refuses a cursor below the mark, because events after it
 * are gone, and accepts one at or above it, so a quiet project's reader whose last event aged
 * out is not told to start over. Test events (sendTestWebhook) are never pulled, so removing
 * one loses a reader nothing and moves no mark: counted, a test event sent after a caught-up
 * reader's last event expired its cursor when it aged out (docs/operations.md).
 */
async function deleteEvents(db: Db, pick: Prisma.Sql): Promise<number> {
  const rows = await db.$queryRaw<{ n: number }[]>`
    WITH gone AS (DELETE FROM outbox_events WHERE id IN (${pick}) RETURNING project_id, seq, test),
     marked AS (
       INSERT INTO event_retention (project_id, swept_seq, swept_at)
       SELECT project_id, max(seq), now() FROM gone WHERE NOT test GROUP BY project_id
       ON CONFLICT (project_id) DO UPDATE
         SET swept_seq = greatest(event_retention.swept_seq, excluded.swept_seq), swept_at = excluded.swept_at
     )
     SELECT count(*)::int AS n FROM gone`;
  return Number(rows[0]?.n ?? 0);
}

const rowsDeleted = new Counter({
  name: "linkgate_retention_rows_deleted_total",
  help: "rows the retention sweep of this process deleted, by table (an event's deliveries go with it by cascade, not counted)",
  labelNames: ["table"],
  registers: [metrics.registry],
});
const deliveriesExpired = new Counter({
  name: "linkgate_retention_deliveries_expired_total",
  help: "pending deliveries this process's retention sweep marked failed because their event reached the events' retention",
  registers: [metrics.registry],
});
const lastSweep = new Gauge({
  name: "linkgate_retention_last_sweep_timestamp_seconds",
  help: "when this process last completed a retention sweep run (0: never; a run another process held the lock for does not count)",
  registers: [metrics.registry],
});
const behind = new Gauge({
  name: "linkgate_retention_tables_behind",
  help: "tables the last sweep run of this process left rows in because of its bound (0 when it caught up)",
  registers: [metrics.registry],
});
for (const table of SWEPT_TABLES) rowsDeleted.inc({ table }, 0);

export type SweepReport = {
  swept: boolean;
  deleted: Record<string, number>;
  /** Pending deliveries marked failed because their event reached the events' retention. */
  expired?: number;
  more: string[];
  /** The slowest statement of the run, in ms: the longest any row lock of the sweep was held. */
  longestBatchMs?: number;
};

/**
 * Runs `fn` while this process holds the sweep lock, or not at all. On Postgres the lock is a
 * transaction-level advisory lock on one pooled connection whose transaction does nothing else:
 * the deletes run on other connections in their own short statements, so no row lock outlives
 * its batch. PGlite belongs to one process, so there is nobody to exclude.
 */
async function withSweepLock(database: Database, fn: () => Promise<SweepReport>): Promise<SweepReport> {
  if (database.kind === "pglite") return fn();
  let report: SweepReport = { swept: false, deleted: {}, more: [] };
  await database.prisma.$transaction(
    async (tx) => {
      const [{ locked }] = await tx.$queryRaw<{ locked: boolean }[]>`SELECT pg_try_advisory_xact_lock(${ADVISORY_LOCK}) AS locked`;
      if (locked) report = await fn();
    },
    { timeout: 300_000, maxWait: 10_000 },
  );
  return report;
}

/**
 * One bounded run: each table's expired rows, BATCH at a time, at most MAX_BATCHES batches.
 * `opts.now` sweeps as if it were that time (bench/soak.ts compresses a month into minutes).
 */
export async function sweepOnce(database: Database, settings: RetentionSettings, logger?: Logger, opts: { now?: Date } = {}): Promise<SweepReport> {
  const h = { now: opts.now ? Prisma.sql`${opts.now.toISOString()}::timestamptz` : NOW, ...settings };
  return withSweepLock(database, async () => {
    const deleted: Record<string, number> = {};
    const more: string[] = [];
    let longestBatchMs = 0;
    /** Runs `batch` until it finds less than a batch or reaches the run's bound; returns the rows and whether it was cut off. */
    const inBatches = async (batch: () => Promise<number>): Promise<[number, boolean]> => {
      let total = 0;
      for (let i = 0; i < MAX_BATCHES; i++) {
        const t0 = performance.now();
        const n = await batch();
        longestBatchMs = Math.max(longestBatchMs, performance.now() - t0);
        total += n;
        if (n < BATCH) return [total, false];
      }
      return [total, true];
    };
    // before the events, so that an event whose stalled deliveries end here goes in this run
    const [expired, expiryCutOff] = await inBatches(() => expireStalled(database.prisma, h));
    if (expiryCutOff) more.push("deliveries");
    for (const table of SWEPT_TABLES) {
      const [total, cutOff] = await inBatches(() => deleteBatch(database.prisma, table, h));
      if (cutOff) more.push(table);
      if (total) deleted[table] = total;
    }
    longestBatchMs = Math.round(longestBatchMs);
    for (const [table, n] of Object.entries(deleted)) rowsDeleted.inc({ table }, n);
    deliveriesExpired.inc(expired);
    lastSweep.set(Date.now() / 1000);
    behind.set(more.length);
    if (Object.keys(deleted).length || expired) logger?.info({ deleted, expired, more, longestBatchMs }, "retention sweep");
    return { swept: true, deleted, expired, more, longestBatchMs };
  });
}

export type Sweeper = { stop(): Promise<void> };

/** Sweeps every `intervalMs` (sooner when the last run was cut off by its bound). */
export function startSweeper(opts: { db: Database; settings: RetentionSettings; logger: Logger; intervalMs?: number }): Sweeper {
  const interval = opts.intervalMs ?? (opts.settings.sweepSeconds ?? 60) * 1000;
  if (interval <= 0) return { stop: async () => {} };
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> = Promise.resolve();
  const schedule = (ms: number) => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = sweepOnce(opts.db, opts.settings, opts.logger)
        .then((r) => schedule(r.more.length ? 1_000 : interval))
        .catch((err) => {
          opts.logger.warn({ err: String(err) }, "retention sweep failed; trying again later");
          schedule(interval);
        });
    }, ms);
    timer.unref();
  };
  schedule(interval);
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running.catch(() => {});
    },
  };
}
