// The delivery worker: claim due deliveries in batches, send them concurrently, record the
// outcomes in batches. Any number of workers (processes or instances) can share a database;
// leases (sql.ts) make each delivery theirs alone until it is recorded or the lease runs out.
//
// Timing: a worker wakes on NOTIFY linkgate_deliveries (sent by enqueue and by redelivery),
// on its own retries falling due, after recording results (which frees per-webhook room), on
// free capacity while there is a backlog, when an open breaker lets its probe go, and on a short
// poll (the backstop for everything else, e.g. other workers' retries or a lost LISTEN
// connection).
//
// Fairness: how many of an endpoint's deliveries this worker claims is up to its breaker
// (breaker.ts): an endpoint earns concurrency by answering, and one that stalls is left alone
// but for one probe at a time, so dead receivers cannot fill the send slots.
//
// Pipelining: sending, claiming and recording overlap. Up to one batch of claimed deliveries
// waits in a local queue while `concurrency` sends are in flight, so a finished send is
// replaced at once, without a database round trip; results are recorded in the background and
// do not hold a send slot. In lockstep instead (claim → send all → record → claim), one worker
// idled through two round trips per batch: 1,240 events/s in the first benchmark run, on a
// loaded machine; see bench/RESULTS.md for where it stands now.
//
// Failure model: a failed query is logged and retried after a growing pause (100 ms … 5 s);
// reconnecting is the pg Pool's job. Results that cannot be recorded stay in memory (no more
// is claimed once MAX_UNRECORDED wait, so memory stays bounded) and their leases keep being
// renewed.
// If the process dies, its leases run out and other workers send those deliveries again:
// delivery is at-least-once.
import { setMaxListeners } from "node:events";
import { hostname } from "node:os";
import { randomBytes, randomFillSync } from "node:crypto";
import type { Config } from "../config.ts";
import { unseal, type MasterKey } from "../crypto.ts";
import type { Database } from "../db/client.ts";
import { recordDelivery, type DeliveryOutcome } from "../metrics.ts";
import { liveSecrets, type LiveSecrets } from "../webhooks/signing.ts";
import type { LookupFn } from "../webhooks/target-guard.ts";
import { DELIVERY_CHANNEL } from "../webhooks/outbox.ts";
import { decide } from "./schedule.ts";
import { createSender, secretRef, type Sender, type SendResult } from "./sender.ts";
import { claimDue, DEFAULT_PER_WEBHOOK_CAP, recordResults, releaseLeases, renewLeases, type ClaimedDelivery, type DeliveryResult } from "./sql.ts";
import { disableDeadWebhooks } from "./log.ts";
import { DEFAULT_BREAKER, EndpointBreakers, verdictOf, type BreakerSettings, type Transition } from "./breaker.ts";

/** pino-compatible subset. */
export type Logger = {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
};

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

export type WorkerOptions = {
  db: Database;
  config: Pick<Config, "retryScheduleMs" | "webhookTimeoutMs" | "webhookAllowPrivate"> & { webhookBreaker?: Partial<BreakerSettings> };
  masterKey: MasterKey;
  logger?: Logger;
  /** Names this worker's leases; unique per instance. */
  workerId?: string;
  /**
   * Most sends in flight. Default 50. Besides those, up to `batchSize` claimed deliveries wait
   * (leased) in a local queue, and results waiting to be recorded are bounded by
   * MAX_UNRECORDED (claiming pauses at that bound, e.g. while the database is unreachable).
   */
  concurrency?: number;
  /** Most deliveries per claim. Default 50. */
  batchSize?: number;
  /**
   * Most leased deliveries per webhook across all workers. Default 20. Within it, each
   * endpoint gets the concurrency its answers earn (breaker.ts).
   */
  perWebhookCap?: number;
  /** Lease length. Default 30 s + the webhook timeout. */
  leaseMs?: number;
  /** Poll interval when idle (backstop for NOTIFY). Default 1000 ms. */
  pollMs?: number;
  /** How often disableDeadWebhooks runs; 0 turns it off. Default 60 s. */
  maintenanceIntervalMs?: number;
  /** For tests: DNS for the target check, and the jitter source. */
  lookup?: LookupFn;
  random?: () => number;
};

export type WorkerStats = {
  /** Deliveries claimed. */
  claimed: number;
  /** Attempt results recorded. */
  recorded: number;
  succeeded: number;
  retried: number;
  failed: number;
  gone: number;
  /** Results not applied because the lease had been lost (someone else owns the delivery). */
  lostLeases: number;
  dbErrors: number;
  webhooksDisabled: number;
  /** Sends running now. */
  readonly inFlight: number;
  /** Results waiting to be recorded. */
  readonly unrecorded: number;
  /** Claimed deliveries waiting for a send slot. */
  readonly queued: number;
  /** Claimed deliveries handed back unsent because their endpoint's breaker had opened. */
  breakerReleased: number;
};

export type DeliveryWorker = {
  readonly id: string;
  /** Stops claiming, waits for in-flight sends (bounded by the timeout), records them, releases the rest. */
  stop(): Promise<void>;
  /**
   * Stops at once (a shutdown deadline has passed): aborts in-flight sends without recording
   * an attempt for them and releases their leases with everything else this worker holds, so
   * another worker sends them right away. Results already received are still recorded.
   * Resolves when stop() does.
   */
  abandon(): Promise<void>;
  /** Look for due deliveries now. */
  wake(): void;
  readonly stats: WorkerStats;
  /** This worker's view of one endpoint (breaker.ts). */
  endpoint(webhookId: string): { state: "closed" | "open" | "half-open"; limit: number; active: number };
};

const MAX_RECORD_BATCH = 500;

/**
 * Attempt-log ids, `att_` + 16 random bytes in base64url like newId("att"), cut from one
 * buffer of random bytes filled 256 ids at a time: one call into the system's randomness per
 * id cost ~2–6 µs per delivery on a busy machine.
 */
const ID_BYTES = 16;
const idPool = Buffer.alloc(ID_BYTES * 256);
let idNext = idPool.length;
function attemptId(): string {
  if (idNext === idPool.length) {
    randomFillSync(idPool);
    idNext = 0;
  }
  const id = `att_${idPool.toString("base64url", idNext, idNext + ID_BYTES)}`;
  idNext += ID_BYTES;
  return id;
}
/** Results not yet recorded beyond which no more is claimed (memory stays bounded). */
const MAX_UNRECORDED = 1_000;
const RECORD_DELAY_MS = 10;
/**
 * On PGlite, without a backlog, a claim starts no sooner than this many times the last claim's
 * duration after it ended (at most MAX_CLAIM_GAP_MS). Every committed event NOTIFYs, and PGlite
 * runs the database on the worker's own thread, where a claim costs ~2.2 ms and a record ~2 ms
 * whatever their size: claiming at every NOTIFY made those fixed costs the thread's whole load.
 * An open loop of 300 events/s (worker, database and load in one process, as in the delivery
 * benchmark's PGlite rows) waited p50 1,069 ms from commit to receipt before, 11 ms after (p99
 * 1,380 → 102 ms); at 500/s p50 3,242 → 13 ms. Factor 2 gave 23 ms at 300/s. On Postgres the
 * claim runs in the server, in parallel with the worker: there the gap only added latency
 * (open-loop p99 5 → 15 ms at 500/s) and slowed drains whose claims come back short of a full
 * batch, so Postgres claims at once.
 */
const PGLITE_CLAIM_GAP_FACTOR = 4;
const MAX_CLAIM_GAP_MS = 20;
const MAX_DB_BACKOFF_MS = 5_000;

/** A level-triggered wake-up: notify() before wait() is not lost. */
class Signal {
  private pending = false;
  private waiter: ((notified: boolean) => void) | null = null;
  private timer: NodeJS.Timeout | null = null;
  notify(): void {
    this.pending = true;
    this.fire(true);
  }
  /** Resolves true when notified, false when `ms` pass first. */
  wait(ms: number): Promise<boolean> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      this.waiter = resolve;
      this.timer = setTimeout(() => this.fire(false), ms);
    });
  }
  private fire(notified: boolean): void {
    const w = this.waiter;
    if (!w) return;
    this.waiter = null;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (notified) this.pending = false;
    w(notified);
  }
}

export function startWorker(opts: WorkerOptions): DeliveryWorker {
  const { db, config, masterKey } = opts;
  const log = opts.logger ?? silent;
  const id = opts.workerId ?? `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
  const concurrency = Math.max(1, opts.concurrency ?? 50);
  const batchSize = Math.max(1, Math.min(opts.batchSize ?? 50, concurrency));
  const perWebhookCap = Math.max(1, Math.floor(opts.perWebhookCap ?? DEFAULT_PER_WEBHOOK_CAP));
  const leaseMs = opts.leaseMs ?? 30_000 + config.webhookTimeoutMs;
  const pollMs = opts.pollMs ?? 1_000;
  const claimGapFactor = db.driver.kind === "pglite" ? PGLITE_CLAIM_GAP_FACTOR : 0;
  const maintenanceMs = opts.maintenanceIntervalMs ?? 60_000;
  const schedule = config.retryScheduleMs;
  const random = opts.random ?? Math.random;

  const sender: Sender = createSender({ timeoutMs: config.webhookTimeoutMs, allowPrivate: config.webhookAllowPrivate, lookup: opts.lookup });
  const sending = new Map<string, Promise<void>>();
  let unrecorded: DeliveryResult[] = [];
  let recording: DeliveryResult[] = [];
  let flushing: Promise<void> | null = null;

  const kick = new Signal();
  const abortSends = new AbortController();
  setMaxListeners(0, abortSends.signal); // one listener per send in flight
  let stopping = false;
  let stopped: Promise<void> | null = null;
  let abandoned = false;
  let handedBack = 0;
  let backlog = false;
  let dbBackoff = 0;
  let relisten = false;
  let unlisten: (() => Promise<void>) | null = null;
  let retryTimer: NodeJS.Timeout | null = null;
  let retryAt = Infinity;
  let drained: (() => void) | null = null;
  const sleepers = new Set<() => void>();

  const stats: WorkerStats = {
    claimed: 0,
    recorded: 0,
    succeeded: 0,
    retried: 0,
    failed: 0,
    gone: 0,
    lostLeases: 0,
    dbErrors: 0,
    webhooksDisabled: 0,
    breakerReleased: 0,
    get inFlight() {
      return sending.size;
    },
    get unrecorded() {
      return unrecorded.length + recording.length;
    },
    get queued() {
      return queued.length;
    },
  };

  const breakers = new EndpointBreakers(perWebhookCap, { ...DEFAULT_BREAKER, ...config.webhookBreaker }, breakerMoved);
  function breakerMoved(t: Transition): void {
    const fields = { event: `webhook.breaker.${t.to}`, webhookId: t.webhookId, from: t.from, failuresInRow: t.failures, openMs: t.openMs, workerId: id };
    if (t.to === "open") {
      log.warn(fields, "webhook breaker opened: no deliveries to this endpoint until a probe answers");
      wakeAt(t.openMs ?? 0); // the probe goes when it falls due, not at the next poll
    } else log.info(fields, `webhook breaker ${t.to}`);
  }

  /** Claimed, leased, not started yet: the next sends start from here without a round trip. */
  const queued: ClaimedDelivery[] = [];
  /**
   * Every delivery this worker leased and has not recorded yet (queued, sending, waiting to be
   * recorded, or handed back by abandon()): what it renews, and what stop() releases.
   */
  const held = new Set<string>();
  const prefetch = batchSize;
  /** How many more deliveries this worker can take on now. */
  const claimRoom = () =>
    unrecorded.length + recording.length >= MAX_UNRECORDED ? 0 : concurrency + prefetch - sending.size - queued.length;

  /** A pause that stop() cuts short. */
  function sleep(ms: number): Promise<void> {
    if (stopping) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        sleepers.delete(done);
        resolve();
      };
      const t = setTimeout(done, ms);
      sleepers.add(done);
    });
  }

  function dbFailed(what: string, err: unknown): number {
    stats.dbErrors++;
    relisten = true;
    dbBackoff = Math.min(MAX_DB_BACKOFF_MS, dbBackoff ? dbBackoff * 2 : 100);
    log.error({ err: errorSummary(err), workerId: id, retryInMs: dbBackoff }, `delivery worker: ${what} failed`);
    return dbBackoff;
  }
  const dbOk = () => {
    dbBackoff = 0;
  };

  /** Wakes the loop when the earliest retry recorded by this worker falls due. */
  function wakeAt(delayMs: number): void {
    const at = Date.now() + delayMs;
    if (at >= retryAt || stopping) return;
    if (retryTimer) clearTimeout(retryTimer);
    retryAt = at;
    retryTimer = setTimeout(() => {
      retryTimer = null;
      retryAt = Infinity;
      kick.notify();
    }, delayMs + 5);
  }

  let subscribing: Promise<void> | null = null;
  function subscribe(): Promise<void> {
    subscribing ??= (async () => {
      const old = unlisten;
      unlisten = null;
      if (old) await old().catch(() => {});
      try {
        const off = await db.listen(DELIVERY_CHANNEL, () => kick.notify());
        if (stopping) await off().catch(() => {});
        else unlisten = off;
        relisten = false;
      } catch (err) {
        relisten = true;
        log.warn({ err: errorSummary(err), workerId: id }, "delivery worker: LISTEN failed; polling until it works");
      }
    })().finally(() => (subscribing = null));
    return subscribing;
  }

  // ---- sending -------------------------------------------------------------------------------

  /** A failed attempt that never reached the network (reported, retried like any other). */
  const internalFailure = (error: string): SendResult => ({
    startedAt: new Date(),
    durationMs: 0,
    statusCode: null,
    retryAfter: null,
    error,
    responseExcerpt: null,
    requestHeaders: {},
    reached: false,
  });

  /**
   * Webhook secrets, unsealed once per sealed value (a rotation seals a new value, so a stale
   * entry is never used), with the ref the attempt log names them by. Unsealing derives the
   * key with HKDF every time: ~50 µs, a tenth of a delivery's CPU when done per attempt.
   * Bounded; the oldest entry goes first.
   */
  const unsealed = new Map<string, { plain: string; ref: string }>();
  function openSecret(sealed: string): { plain: string; ref: string } {
    let secret = unsealed.get(sealed);
    if (secret === undefined) {
      const plain = unseal(masterKey, sealed);
      secret = { plain, ref: secretRef(plain) };
      unsealed.set(sealed, secret);
      if (unsealed.size > 10_000) unsealed.delete(unsealed.keys().next().value!);
    }
    return secret;
  }

  /** The attempt's result, or null when abandon() cut the send short (nothing to record). */
  async function attempt(c: ClaimedDelivery): Promise<DeliveryResult | null> {
    let sent: SendResult;
    let secrets: LiveSecrets | null = null;
    let refs: string[] = [];
    try {
      const current = openSecret(c.secretSealed);
      const previous = c.previousSecretSealed ? openSecret(c.previousSecretSealed) : null;
      secrets = liveSecrets(
        { secret: current.plain, previousSecret: previous?.plain ?? null, previousSecretExpiresAt: c.previousSecretExpiresAt },
        new Date(),
      );
      refs = secrets.previous ? [current.ref, previous!.ref] : [current.ref];
    } catch (err) {
      // Never log the sealed or plain secret; a wrong LINKGATE_SECRET_KEY is the usual cause.
      log.error({ err: errorSummary(err), deliveryId: c.deliveryId, webhookId: c.webhookId }, "delivery worker: cannot unseal the webhook secret");
    }
    if (!secrets) {
      sent = internalFailure("internal: the webhook secret could not be decrypted");
    } else {
      try {
        sent = await sender.send(
          { url: c.url, body: c.body, eventId: c.eventId, eventType: c.eventType, attempt: c.attempt, secrets },
          abortSends.signal,
        );
        // Cut short by abandon(): not the receiver's fault, so not an attempt; releaseLeases
        // hands the delivery back untouched.
        if (abandoned && sent.statusCode === null) {
          breakers.finished(c.webhookId, null, Date.now());
          return null;
        }
      } catch (err) {
        // sender.send reports every network outcome as a result; this is a bug, not a receiver's fault.
        log.error({ err: errorSummary(err), deliveryId: c.deliveryId }, "delivery worker: send failed unexpectedly");
        sent = internalFailure(`internal: ${errorSummary(err).message}`);
      }
    }
    breakers.finished(c.webhookId, verdictOf(sent, config.webhookTimeoutMs), Date.now());
    const decision = decide({ attempt: c.attempt, statusCode: sent.statusCode, retryAfter: sent.retryAfter }, schedule, { random });
    report(decision.status, c, sent);
    log.debug(
      { deliveryId: c.deliveryId, eventId: c.eventId, webhookId: c.webhookId, attempt: c.attempt, status: sent.statusCode, error: sent.error, outcome: decision.status, durationMs: sent.durationMs },
      "delivery attempt",
    );
    return {
      deliveryId: c.deliveryId,
      attemptId: attemptId(),
      attempt: c.attempt,
      status: decision.status,
      delayMs: decision.status === "pending" ? decision.delayMs : null,
      statusCode: sent.statusCode,
      error: sent.error,
      startedAt: sent.startedAt,
      durationMs: sent.durationMs,
      responseExcerpt: sent.responseExcerpt,
      signedWith: sent.reached ? refs : null,
    };
  }

  /** Every attempt to the metrics, with commit → 2xx for a success (both on this clock's terms). */
  function report(status: DeliveryResult["status"], c: ClaimedDelivery, sent: SendResult): void {
    const outcome: DeliveryOutcome = status === "pending" ? "retried" : status;
    recordDelivery(outcome, status === "succeeded" ? Math.max(0, sent.startedAt.getTime() + sent.durationMs - c.eventCreatedMs) : undefined);
  }

  /**
   * Starts queued deliveries while send slots are free (never once stopping). Those whose
   * endpoint's breaker opened since they were claimed are handed back instead.
   */
  function pump(): void {
    const now = Date.now();
    const back: string[] = [];
    while (!stopping && sending.size < concurrency && queued.length > 0) {
      const c = queued.shift()!;
      if (breakers.mayStart(c.webhookId, now)) startSend(c);
      else {
        breakers.finished(c.webhookId, null, now);
        back.push(c.deliveryId);
      }
    }
    if (back.length > 0) handBack(back);
  }

  /**
   * Gives back leases without an attempt: the deliveries stay due, first in line, for whoever
   * may send to their endpoint. Should the release fail, the leases are no longer renewed and
   * run out instead.
   */
  function handBack(ids: string[]): void {
    for (const d of ids) held.delete(d);
    stats.breakerReleased += ids.length;
    releaseLeases(db, id, ids).catch((err) => dbFailed("handing back claims", err));
  }

  function startSend(c: ClaimedDelivery): void {
    const p = attempt(c).then((result) => {
      sending.delete(c.deliveryId);
      if (result) {
        unrecorded.push(result);
        scheduleFlush();
      } else handedBack++;
      pump();
      if (backlog) kick.notify();
      if (sending.size === 0) drained?.();
    });
    sending.set(c.deliveryId, p);
  }

  // ---- recording -----------------------------------------------------------------------------

  /**
   * Results are recorded in batches: at once when a batch is full or nothing else is being
   * sent, otherwise after RECORD_DELAY_MS so the results of sends finishing together share one
   * statement (on PGlite, which runs in this thread, they would otherwise go one by one).
   */
  let flushTimer: NodeJS.Timeout | null = null;
  function scheduleFlush(): void {
    if (flushing) return; // the running flush picks them up
    if (unrecorded.length >= batchSize || sending.size === 0 || stopping) {
      if (flushTimer) clearTimeout(flushTimer);
      flushTimer = null;
      void flush();
    } else {
      flushTimer ??= setTimeout(() => {
        flushTimer = null;
        void flush();
      }, RECORD_DELAY_MS);
    }
  }

  /** Records everything waiting; results arriving meanwhile form the next batch. */
  function flush(): Promise<void> {
    flushing ??= (async () => {
      try {
        while (unrecorded.length > 0) {
          recording = unrecorded.slice(0, MAX_RECORD_BATCH);
          unrecorded = unrecorded.slice(recording.length);
          let applied: Set<string>;
          try {
            await renewing;
            applied = new Set(await recordResults(db, id, recording));
            dbOk();
          } catch (err) {
            unrecorded = recording.concat(unrecorded);
            recording = [];
            const pause = dbFailed("recording results", err);
            if (stopping) return; // stop() retries with its own deadline
            await sleep(pause);
            continue;
          }
          for (const r of recording) {
            held.delete(r.deliveryId);
            stats.recorded++;
            if (!applied.has(r.deliveryId)) {
              stats.lostLeases++;
              log.warn({ deliveryId: r.deliveryId, attempt: r.attempt, workerId: id }, "delivery worker: lease lost before the result was recorded");
              continue;
            }
            if (r.status === "pending") {
              stats.retried++;
              wakeAt(r.delayMs ?? 0);
            } else stats[r.status]++;
          }
          recording = [];
          // Recorded results free per-webhook room in the database (a claim held back by the
          // cap returns fewer rows than asked, so "not a full batch" does not mean "nothing due").
          if (applied.size > 0) kick.notify();
        }
      } catch (err) {
        // Not a database error (those are handled above): keep the results for the next flush.
        unrecorded = recording.concat(unrecorded);
        recording = [];
        log.error({ err: errorSummary(err), workerId: id }, "delivery worker: recording crashed");
      } finally {
        flushing = null;
      }
    })();
    return flushing;
  }

  // ---- the claim loop ------------------------------------------------------------------------

  async function loop(): Promise<void> {
    let waitedOut = true;
    let nextClaimAt = 0;
    while (!stopping) {
      const gap = nextClaimAt - performance.now();
      if (!backlog && gap > 0) await sleep(gap);
      const free = claimRoom();
      // With a backlog, wait until a useful batch fits rather than claiming one row per freed
      // slot, unless a whole poll interval has passed (slow receivers holding the slots).
      const worthIt = !backlog || waitedOut || free >= Math.ceil(batchSize / 2);
      if (free <= 0 || !worthIt) {
        waitedOut = !(await kick.wait(pollMs));
        continue;
      }
      const limit = Math.min(batchSize, free);
      let claimed: ClaimedDelivery[];
      try {
        const started = performance.now();
        claimed = await claimDue(db, { workerId: id, limit, leaseMs, perWebhookCap, endpointRooms: breakers.claimRooms(Date.now()) });
        const ended = performance.now();
        nextClaimAt = ended + Math.min(MAX_CLAIM_GAP_MS, claimGapFactor * (ended - started));
        dbOk();
      } catch (err) {
        await sleep(dbFailed("claiming deliveries", err));
        continue;
      }
      const now = Date.now();
      for (const c of claimed) {
        held.add(c.deliveryId);
        breakers.taken(c.webhookId, now);
      }
      if (stopping) break; // stop() releases what was just claimed
      stats.claimed += claimed.length;
      queued.push(...claimed);
      pump();
      backlog = claimed.length === limit;
      waitedOut = false;
      if (!backlog) waitedOut = !(await kick.wait(pollMs));
    }
  }

  // ---- timers --------------------------------------------------------------------------------

  /**
   * Lease renewals skip the deliveries whose results are waiting to be recorded, and a record
   * waits for a renewal under way: the two statements never update the same rows at once. They
   * used to, from two pool connections, each locking its rows in its own order, and a chaos run
   * ended a record batch in "deadlock detected" (retried, so nothing was lost).
   */
  let renewing: Promise<unknown> | null = null;
  const renewTimer = setInterval(() => {
    if (renewing || stopping) return;
    const recordingIds = new Set([...recording, ...unrecorded].map((r) => r.deliveryId));
    const ids = [...held].filter((d) => !recordingIds.has(d));
    if (ids.length === 0) return;
    renewing = renewLeases(db, id, ids, leaseMs)
      .then(
        (kept) => {
          if (kept.length < ids.length) log.debug({ workerId: id, lost: ids.length - kept.length }, "delivery worker: some leases were not renewed");
        },
        (err) => dbFailed("renewing leases", err),
      )
      .finally(() => (renewing = null));
  }, Math.max(50, Math.floor(leaseMs / 3)));

  const listenTimer = setInterval(() => {
    if (relisten && !stopping) void subscribe();
  }, 5_000);

  let maintaining = false;
  const maintenanceTimer =
    maintenanceMs > 0
      ? setInterval(() => {
          if (maintaining || stopping) return;
          maintaining = true;
          disableDeadWebhooks(db, new Date())
            .then((disabled) => {
              stats.webhooksDisabled += disabled.length;
              for (const w of disabled) log.warn({ event: "webhook.disabled", webhookId: w.webhookId, projectId: w.projectId, reason: w.reason }, "webhook.disabled");
            })
            .catch((err) => dbFailed("disabling dead webhooks", err))
            .finally(() => (maintaining = false));
        }, maintenanceMs)
      : null;
  for (const t of [renewTimer, listenTimer, maintenanceTimer]) t?.unref();

  void subscribe().then(() => kick.notify());
  const looping = loop().catch((err) => log.error({ err: errorSummary(err), workerId: id }, "delivery worker: loop crashed"));
  log.info({ workerId: id, concurrency, batchSize, perWebhookCap, leaseMs }, "delivery worker started");

  async function shutdown(): Promise<void> {
    stopping = true;
    kick.notify();
    for (const wakeSleeper of [...sleepers]) wakeSleeper();
    clearInterval(renewTimer);
    clearInterval(listenTimer);
    if (maintenanceTimer) clearInterval(maintenanceTimer);
    if (retryTimer) clearTimeout(retryTimer);
    await looping;
    // Queued claims are never started: releaseLeases below hands them back.
    queued.length = 0;

    // In-flight sends end within the timeout; past it (plus a margin) they are aborted.
    if (sending.size > 0) {
      const allDone = new Promise<void>((resolve) => (drained = resolve));
      const timer = setTimeout(() => abortSends.abort(new Error("worker stopping")), config.webhookTimeoutMs + 1_000);
      await allDone;
      clearTimeout(timer);
    }

    // Record what was sent: a few tries, bounded, since the database may be the reason we stop.
    if (flushTimer) clearTimeout(flushTimer);
    const deadline = Date.now() + 10_000;
    if (flushing) await flushing;
    while (unrecorded.length > 0 && Date.now() < deadline) {
      await flush();
      if (unrecorded.length > 0) await new Promise((r) => setTimeout(r, Math.min(dbBackoff || 100, 1_000)));
    }
    if (unrecorded.length > 0) log.warn({ workerId: id, results: unrecorded.length }, "delivery worker: results not recorded; those deliveries will be sent again");

    try {
      await renewing;
      const released = await releaseLeases(db, id, [...held]);
      if (released > 0) log.info({ workerId: id, released, inFlight: handedBack }, "delivery worker: released unsent claims");
    } catch (err) {
      dbFailed("releasing leases", err);
    }
    if (subscribing) await subscribing;
    if (unlisten) await unlisten().catch(() => {});
    await sender.close();
    log.info({ workerId: id, ...snapshot(stats) }, "delivery worker stopped");
  }

  const stop = () => (stopped ??= shutdown());
  return {
    id,
    stats,
    wake: () => kick.notify(),
    endpoint: (webhookId) => breakers.stateOf(webhookId, Date.now()),
    stop,
    abandon() {
      abandoned = true;
      abortSends.abort(new Error("worker abandoned its in-flight sends"));
      return stop();
    },
  };
}

function snapshot(stats: WorkerStats): Record<string, number> {
  return Object.fromEntries(Object.keys(stats).map((k) => [k, stats[k as keyof WorkerStats]]));
}

/** Enough to diagnose a failure, without dumping query parameters (which may hold bodies). */
function errorSummary(err: unknown): { name?: string; code?: string; message: string } {
  const e = err as { name?: string; code?: string; message?: string };
  const message = (e?.message ?? String(err))
    .replace(/^\s*Invalid `[^`]*` invocation:/, "") // Prisma's preamble
    .replace(/\s+/g, " ")
    .trim();
  return { name: e?.name, code: e?.code, message: message.slice(0, 500) };
}
