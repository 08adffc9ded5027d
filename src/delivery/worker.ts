// The delivery worker: claim due deliveries in batches, send them concurrently, record the
// outcomes in batches. Any number of workers (processes or instances) can share a database;
// leases (sql.ts) make each delivery theirs alone until it is recorded or the lease runs out.
//
// The parts, each with its own state, wired together here:
// * claim-loop.ts: when to claim and how many (NOTIFY, retries and probes falling due, the
//   poll, PGlite's claim spacing);
// * send-pool.ts: the send slots, the local queue in front of them, each endpoint's breaker;
// * recorder.ts: the leases (renewal, release) and the recording of results in batches;
// * lifecycle.ts: running, stopping, abandoning, stopped, and what stop() and abandon() do in each.
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
// replaced at once, without a database round trip (unless the delivery waited long enough for
// its webhook to have changed since the claim, or the worker heard that it did: send-pool.ts
// reads it again then); results are recorded in the background and do not hold a send slot.
// In lockstep instead (claim → send
// all → record → claim), one worker idled through two round trips per batch: 1,240 events/s in
// the first benchmark run, on a loaded machine; see bench/RESULTS.md for where it stands now.
//
// Failure model: a failed query is logged and retried after a growing pause (100 ms … 5 s,
// failures.ts); reconnecting is the pg Pool's job. Results that cannot be recorded stay in
// memory (no more is claimed once MAX_UNRECORDED wait, recorder.ts, so memory stays bounded)
// and their leases keep being renewed.
// If the process dies, its leases run out and other workers send those deliveries again:
// delivery is at-least-once.
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import type { Config } from "../config.ts";
import type { MasterKey } from "../crypto.ts";
import type { Database } from "../db/client.ts";
import { watchClock } from "../db/clock.ts";
import type { LookupFn } from "../webhooks/target-guard.ts";
import { disableDeadWebhooks } from "./dead-webhooks.ts";
import type { BreakerSettings } from "./breaker.ts";
import { ClaimLoop, IDLE_AFTER_MS } from "./claim-loop.ts";
import { DbBackoff, silent, type Logger } from "./failures.ts";
import { Lifecycle, type WorkerState } from "./lifecycle.ts";
import { Recorder } from "./recorder.ts";
import { RECHECK_AFTER_MS, SendPool } from "./send-pool.ts";
import { DEFAULT_PER_WEBHOOK_CAP, webhooksNow } from "./sql.ts";
import type { WorkerStats } from "./stats.ts";

export type { Logger } from "./failures.ts";
export type { WorkerState } from "./lifecycle.ts";

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
  /**
   * How long a busy worker keeps its promise to claim again (Postgres) while its claims find
   * nothing. Default 100 ms (claim-loop.ts says why).
   */
  idleAfterMs?: number;
  /** How often disableDeadWebhooks and the clock check (src/db/clock.ts) run; 0 turns them off after the first clock check. Default 60 s. */
  maintenanceIntervalMs?: number;
  /**
   * A claimed delivery that waits longer than this for a send slot has its webhook read again
   * before it starts. Default RECHECK_AFTER_MS (send-pool.ts says why); tests set 0.
   */
  recheckAfterMs?: number;
  /** For tests: DNS for the target check, and the jitter source. */
  lookup?: LookupFn;
  random?: () => number;
  /** For tests: this machine's clock as the clock check reads it (src/db/clock.ts). */
  clock?: () => number;
};

export type { WorkerStats };

export type DeliveryWorker = {
  readonly id: string;
  /** running, stopping, abandoning or stopped (lifecycle.ts). */
  readonly state: WorkerState;
  /** Stops claiming, waits for in-flight sends (bounded by the timeout), records them, releases the rest. */
  stop(): Promise<void>;
  /**
   * Stops at once (a shutdown deadline has passed): aborts in-flight sends without recording
   * an attempt for them and releases their leases with everything else this worker holds, so
   * another worker sends them right away. Results already received are still recorded.
   * Resolves when stop() does; after the worker has stopped it changes nothing.
   */
  abandon(): Promise<void>;
  /** Look for due deliveries now. */
  wake(): void;
  readonly stats: WorkerStats;
  /** This worker's view of one endpoint (breaker.ts). */
  endpoint(webhookId: string): { state: "closed" | "open" | "half-open"; limit: number; active: number };
};

type Parts = { lifecycle: Lifecycle; claims: ClaimLoop; pool: SendPool; recorder: Recorder; maintenance: { stop(): void } };

export function startWorker(opts: WorkerOptions): DeliveryWorker {
  const { db, config, masterKey } = opts;
  const log = opts.logger ?? silent;
  const id = opts.workerId ?? `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
  const concurrency = Math.max(1, opts.concurrency ?? 50);
  const batchSize = Math.max(1, Math.min(opts.batchSize ?? 50, concurrency));
  const perWebhookCap = Math.max(1, Math.floor(opts.perWebhookCap ?? DEFAULT_PER_WEBHOOK_CAP));
  const leaseMs = opts.leaseMs ?? 30_000 + config.webhookTimeoutMs;
  const pollMs = opts.pollMs ?? 1_000;

  const stats = newStats(() => parts);
  const lifecycle = new Lifecycle({ shutdown: () => shutDown(parts, id, log, config.webhookTimeoutMs, stats), abandonSends: () => pool.abandon() });
  const backoff = new DbBackoff(log, id, stats);
  const recorder = new Recorder({
    db, workerId: id, leaseMs, batchSize, log, stats, backoff, lifecycle,
    inFlight: () => pool.inFlight,
    recorded: () => claims.wake(),
    retryIn: (ms) => claims.wakeAt(ms),
  });
  const pool = new SendPool({
    concurrency, prefetch: batchSize, perWebhookCap, config, masterKey, lookup: opts.lookup, random: opts.random ?? Math.random, workerId: id, log, lifecycle,
    recheckAfterMs: opts.recheckAfterMs ?? RECHECK_AFTER_MS,
    webhooksNow: (claimed) =>
      webhooksNow(db, claimed).then(
        (webhooks) => (backoff.ok(), webhooks),
        (err) => (backoff.failed("reading the webhooks of queued deliveries again", err), null),
      ),
    result: (r) => recorder.add(r),
    handBack: (ids, why) => recorder.handBack(ids, why),
    slotFreed: () => claims.slotFreed(),
    probeIn: (ms) => claims.wakeAt(ms),
  });
  const claims = new ClaimLoop({
    db, workerId: id, batchSize, leaseMs, perWebhookCap, pollMs, idleAfterMs: opts.idleAfterMs ?? IDLE_AFTER_MS, lifecycle, backoff, log,
    // Back-pressure: once the recorder holds too many results, nothing more is claimed.
    room: () => (recorder.full ? 0 : pool.room),
    endpointRooms: (now) => pool.breakers.claimRooms(now),
    projectLoads: () => pool.projectLoads(),
    leased: (claimed) => {
      recorder.hold(claimed);
      pool.taken(claimed);
    },
    take: (claimed) => {
      stats.claimed += claimed.length;
      pool.take(claimed);
    },
    webhookChanged: (webhookId) => {
      stats.webhookChanges++;
      pool.webhookChanged(webhookId);
    },
    listening: (up) => pool.listening(up),
  });
  const clock = watchClock(db, log, SIGNATURES_BREAK, opts.clock);
  const maintenance = startMaintenance(db, opts.maintenanceIntervalMs ?? 60_000, { lifecycle, backoff, log, stats, clock });
  const parts: Parts = { lifecycle, claims, pool, recorder, maintenance };

  claims.start();
  log.info({ workerId: id, concurrency, batchSize, perWebhookCap, leaseMs }, "delivery worker started");
  return {
    id,
    stats,
    get state() {
      return lifecycle.state;
    },
    wake: () => claims.wake(),
    endpoint: (webhookId) => pool.breakers.stateOf(webhookId, Date.now()),
    stop: () => lifecycle.stop(),
    abandon: () => lifecycle.abandon(),
  };
}

/** What stop() and abandon() do, once the lifecycle has left `running`. */
async function shutDown(p: Parts, workerId: string, log: Logger, webhookTimeoutMs: number, stats: WorkerStats): Promise<void> {
  const looped = p.claims.stop();
  p.recorder.stopRenewing();
  p.maintenance.stop();
  await looped;
  // Queued claims are never started: releaseAll below hands them back.
  p.pool.dropQueued();
  // In-flight sends end within the timeout; past it (plus a margin) they are aborted.
  await p.pool.drain(webhookTimeoutMs + 1_000);
  // Record what was sent: a few tries, bounded, since the database may be the reason we stop.
  await p.recorder.recordRemaining(10_000);
  await p.recorder.applyRemaining();
  const released = await p.recorder.releaseAll();
  if (released > 0) log.info({ workerId, released, inFlight: p.pool.abandonedSends }, "delivery worker: released unsent claims");
  await p.claims.close();
  await p.pool.close();
  log.info({ workerId, ...snapshot(stats) }, "delivery worker stopped");
}

/** Counters the parts add to; the gauges read the parts (which exist by the time anyone reads). */
function newStats(parts: () => Parts): WorkerStats {
  return {
    claimed: 0, recorded: 0, succeeded: 0, retried: 0, failed: 0, gone: 0, lostLeases: 0, dbErrors: 0, webhooksDisabled: 0, breakerReleased: 0, webhookReleased: 0, webhookChanges: 0,
    get inFlight() {
      return parts().pool.inFlight;
    },
    get unrecorded() {
      return parts().recorder.waiting;
    },
    get queued() {
      return parts().pool.waiting;
    },
  };
}

/** What a worker whose clock is off breaks (src/db/clock.ts). */
const SIGNATURES_BREAK = "webhook signatures carry this worker's time, and receivers refuse one more than 5 minutes off";

/**
 * The clock check at start, then with disableDeadWebhooks every `everyMs`, one run at a time; 0
 * turns both off after the first check. A check that cannot read the database says nothing: the
 * claims report the database's faults.
 */
function startMaintenance(
  db: Database,
  everyMs: number,
  o: { lifecycle: Lifecycle; backoff: DbBackoff; log: Logger; stats: WorkerStats; clock: ReturnType<typeof watchClock> },
): { stop(): void } {
  const checkClock = () => o.clock.check().catch(() => undefined);
  void checkClock();
  if (everyMs <= 0) return { stop() {} };
  let maintaining = false;
  const timer = setInterval(() => {
    if (maintaining || !o.lifecycle.running) return;
    maintaining = true;
    const disabling = disableDeadWebhooks(db, new Date())
      .then((disabled) => {
        o.stats.webhooksDisabled += disabled.length;
        for (const w of disabled) o.log.warn({ event: "webhook.disabled", webhookId: w.webhookId, projectId: w.projectId, reason: w.reason }, "webhook.disabled");
      })
      .catch((err) => o.backoff.failed("disabling dead webhooks", err));
    void Promise.all([disabling, checkClock()]).finally(() => (maintaining = false));
  }, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

function snapshot(stats: WorkerStats): Record<string, number> {
  return Object.fromEntries(Object.keys(stats).map((k) => [k, stats[k as keyof WorkerStats]]));
}
