// The delivery worker's claim loop (worker.ts): when to ask the database for due deliveries, and
// how many. It owns every wake-up (NOTIFY linkgate_deliveries, this worker's retries falling
// due, a breaker's probe falling due, freed capacity while there is a backlog, and the poll that
// backs them all up) and the spacing of claims on PGlite. How much room there is, and what
// becomes of a claimed delivery, are the other parts' business.
import type { Database } from "../db/client.ts";
import { DELIVERY_CHANNEL } from "../webhooks/outbox.ts";
import { errorSummary, type DbBackoff, type Logger } from "./failures.ts";
import type { Lifecycle } from "./lifecycle.ts";
import { promiseBusy, withdrawBusy } from "./busy.ts";
import { claimDue, type ClaimedDelivery, type EndpointRooms, type ProjectLoads } from "./sql.ts";

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
/**
 * While deliveries keep coming, a Postgres worker promises to claim again within
 * BUSY_PROMISE_MS (busy.ts) and claims at least every BUSY_POLL_MS, besides after each record;
 * commits then send no NOTIFY, which would make them take turns (docs/operations.md, "Waking the
 * workers"). It promises once two claims in a row found deliveries, renews with half the promise
 * left, and withdraws once its claims have found nothing for IDLE_AFTER_MS. Counting empty
 * claims instead (three, 15 ms) undid itself under load: any 15 ms pause of the commits (a slow
 * flush of the log) withdrew the promise, the NOTIFYs that came back made the commits take turns
 * and arrive in bursts with gaps, and the gaps withdrew the next promise; at a target of 2,000
 * commits a second it held a fifth to three quarters of the time. A commit that read the promise
 * just before it was withdrawn can land after the claim that follows the withdrawal: the first
 * wait after one is RECHECK_MS, so such a delivery waits that long, not a whole poll interval.
 * Measured in the delivery benchmark's open loop (bench/RESULTS.md, delivery).
 */
const BUSY_PROMISE_MS = 1_000;
const BUSY_POLL_MS = 5;
export const IDLE_AFTER_MS = 100;
const RECHECK_MS = 50;
/** How often a LISTEN lost with a failed connection is tried again. */
const RELISTEN_MS = 5_000;

/** A level-triggered wake-up: notify() before wait() is not lost. */
export class Signal {
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

export type ClaimLoopOptions = {
  db: Database;
  workerId: string;
  /** Most deliveries per claim. */
  batchSize: number;
  leaseMs: number;
  perWebhookCap: number;
  /** The poll interval: the backstop for every other wake-up. */
  pollMs: number;
  /** A promise is withdrawn once claims have found nothing for this long (IDLE_AFTER_MS by default). */
  idleAfterMs: number;
  lifecycle: Lifecycle;
  backoff: DbBackoff;
  log: Logger;
  /** How many more deliveries the worker can take on now. */
  room(): number;
  /** How many of each endpoint's deliveries this worker may still take (its breakers). */
  endpointRooms(now: number): EndpointRooms;
  /** How many deliveries this worker holds for each project (their turns start after them). */
  projectLoads(): ProjectLoads;
  /** Every claim's deliveries, leased to this worker now, whether or not it still runs. */
  leased(claimed: ClaimedDelivery[]): void;
  /** The same deliveries, to be sent; only while the worker runs. */
  take(claimed: ClaimedDelivery[]): void;
  /** A webhook changed (src/webhooks/changes.sql): its claimed deliveries are read again before they start. */
  webhookChanged(webhookId: string): void;
  /** The LISTEN is up (true: every change from now on is heard) or down (changes go unheard). */
  listening(up: boolean): void;
};

/** The payload of a webhook's change on the delivery channel (src/webhooks/changes.sql); an enqueue's is empty. */
const WEBHOOK_CHANGED = "webhook:";

export class ClaimLoop {
  private readonly kick = new Signal();
  private readonly listening: Subscription;
  private readonly claimGapFactor: number;
  /** The last claim came back full: more is due than there was room for. */
  private backlog = false;
  /** The last wait lasted a whole poll interval. */
  private waitedOut = true;
  /** performance.now() before which a claim without a backlog waits (PGlite). */
  private nextClaimAt = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private retryAt = Infinity;
  private looping: Promise<void> = Promise.resolve();
  /** Promises to claim again are made on Postgres only: on PGlite commits and claims share one thread anyway. */
  private readonly promises: boolean;
  /** performance.now() when this worker's promise runs out (0: none); the database's lasts at least as long. */
  private busyUntil = 0;
  /** The last claim found deliveries. */
  private found = false;
  /** performance.now() when a claim last found deliveries. */
  private foundAt = 0;
  /** The next empty wait is RECHECK_MS (a promise was just withdrawn). */
  private recheck = false;

  constructor(private readonly o: ClaimLoopOptions) {
    this.claimGapFactor = o.db.driver.kind === "pglite" ? PGLITE_CLAIM_GAP_FACTOR : 0;
    this.promises = o.db.driver.kind === "postgres";
    this.listening = new Subscription(o, (payload) => {
      if (payload.startsWith(WEBHOOK_CHANGED)) o.webhookChanged(payload.slice(WEBHOOK_CHANGED.length));
      // a webhook enabled again has deliveries to claim; any other change costs one claim at most
      this.kick.notify();
    });
  }

  start(): void {
    void this.listening.subscribe().then(() => this.kick.notify());
    this.looping = this.run().catch((err) => this.o.log.error({ err: errorSummary(err), workerId: this.o.workerId }, "delivery worker: loop crashed"));
  }

  /** Look for due deliveries now. */
  wake(): void {
    this.kick.notify();
  }

  /** A send slot is free: with a backlog, that may be worth a claim. */
  slotFreed(): void {
    if (this.backlog) this.kick.notify();
  }

  /** Wakes the loop when something this worker knows of falls due (a retry, a breaker's probe). */
  wakeAt(delayMs: number): void {
    const at = Date.now() + delayMs;
    if (at >= this.retryAt || !this.o.lifecycle.running) return;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryAt = at;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.retryAt = Infinity;
      this.kick.notify();
    }, delayMs + 5);
  }

  /** Once the worker has left `running`: resolves when the claim under way, if any, is in. */
  async stop(): Promise<void> {
    this.kick.notify();
    this.listening.stopRetrying();
    if (this.retryTimer) clearTimeout(this.retryTimer);
    await this.looping;
    // claiming has ended: commits must wake the other workers again, not wait for the promise to run out
    await this.withdraw();
  }

  private async withdraw(): Promise<void> {
    if (this.busyUntil === 0) return;
    this.busyUntil = 0;
    await withdrawBusy(this.o.db, this.o.workerId).catch((err) => this.o.backoff.failed("withdrawing a promise to claim", err));
  }

  /** Stops listening; after stop(). */
  close(): Promise<void> {
    return this.listening.close();
  }

  private async run(): Promise<void> {
    const { lifecycle, batchSize, pollMs } = this.o;
    while (lifecycle.running) {
      const gap = this.nextClaimAt - performance.now();
      if (!this.backlog && gap > 0) await lifecycle.sleep(gap);
      const free = this.o.room();
      // With a backlog, wait until a useful batch fits rather than claiming one row per freed
      // slot, unless a whole poll interval has passed (slow receivers holding the slots).
      const worthIt = !this.backlog || this.waitedOut || free >= Math.ceil(batchSize / 2);
      if (free <= 0 || !worthIt) {
        this.waitedOut = !(await this.kick.wait(pollMs));
        continue;
      }
      const limit = Math.min(batchSize, free);
      const claimed = await this.claim(limit);
      if (claimed === null) continue;
      this.o.leased(claimed);
      if (!lifecycle.running) break; // the shutdown releases what was just claimed
      this.o.take(claimed);
      this.backlog = claimed.length === limit;
      this.waitedOut = false;
      const waitMs = await this.keepPromise(claimed.length > 0);
      if (!this.backlog && waitMs > 0) this.waitedOut = !(await this.kick.wait(waitMs)) && waitMs === pollMs;
    }
  }

  /**
   * Makes, renews or withdraws the promise to claim again after a claim that `found` deliveries
   * or none; returns how long to wait for a wake-up before the next claim without a backlog (0:
   * claim again at once, to find what commits made while the promise still held).
   */
  private async keepPromise(found: boolean): Promise<number> {
    const foundBefore = this.found;
    this.found = found;
    if (!this.promises) return this.o.pollMs;
    const now = performance.now();
    if (found) this.foundAt = now;
    const promised = this.busyUntil > now;
    if (found && (promised || foundBefore) && this.busyUntil - now < BUSY_PROMISE_MS / 2) {
      try {
        await promiseBusy(this.o.db, this.o.workerId, BUSY_PROMISE_MS);
        this.busyUntil = now + BUSY_PROMISE_MS;
      } catch (err) {
        this.o.backoff.failed("promising to claim", err);
      }
      return BUSY_POLL_MS;
    }
    if (promised && now - this.foundAt < this.o.idleAfterMs) return BUSY_POLL_MS;
    if (this.busyUntil > 0) {
      this.recheck = true;
      await this.withdraw();
      return 0;
    }
    if (this.recheck) {
      this.recheck = false;
      if (!found) return Math.min(RECHECK_MS, this.o.pollMs);
    }
    return this.o.pollMs;
  }

  /** One claim of at most `limit`; null when it failed (after the backoff's pause). */
  private async claim(limit: number): Promise<ClaimedDelivery[] | null> {
    const { db, workerId, leaseMs, perWebhookCap, backoff } = this.o;
    try {
      const started = performance.now();
      const claimed = await claimDue(db, { workerId, limit, leaseMs, perWebhookCap, endpointRooms: this.o.endpointRooms(Date.now()), projectLoads: this.o.projectLoads() });
      const ended = performance.now();
      this.nextClaimAt = ended + Math.min(MAX_CLAIM_GAP_MS, this.claimGapFactor * (ended - started));
      backoff.ok();
      return claimed;
    } catch (err) {
      await this.o.lifecycle.sleep(backoff.failed("claiming deliveries", err));
      return null;
    }
  }
}

/**
 * LISTEN on the delivery channel. Any failed query may mean the connection holding the LISTEN
 * went too, so after one it is set up again (the poll covers the meantime); so does the end of
 * that connection, which no query of the worker's may see: its pool replaces dead connections
 * quietly, and a worker whose LISTEN connection alone was ended waited for its 1 s poll for
 * every event from then on, without a word in the log (31st review).
 */
class Subscription {
  private unlisten: (() => Promise<void>) | null = null;
  private subscribing: Promise<void> | null = null;
  private relisten = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly o: Pick<ClaimLoopOptions, "db" | "lifecycle" | "backoff" | "log" | "workerId" | "listening">,
    private readonly notified: (payload: string) => void,
  ) {
    o.backoff.onFailure(() => (this.relisten = true));
    this.timer = setInterval(() => {
      if (this.relisten && o.lifecycle.running) void this.subscribe();
    }, RELISTEN_MS);
    this.timer.unref();
  }

  subscribe(): Promise<void> {
    this.subscribing ??= (async () => {
      const old = this.unlisten;
      this.unlisten = null;
      if (old) {
        this.o.listening(false);
        await old().catch(() => {});
      }
      try {
        const off = await this.o.db.listen(DELIVERY_CHANNEL, this.notified, () => this.lost());
        if (!this.o.lifecycle.running) await off().catch(() => {});
        else {
          this.unlisten = off;
          this.o.listening(true);
        }
        this.relisten = false;
      } catch (err) {
        this.relisten = true;
        this.o.log.warn({ err: errorSummary(err), workerId: this.o.workerId }, "delivery worker: LISTEN failed; polling until it works");
      }
    })().finally(() => (this.subscribing = null));
    return this.subscribing;
  }

  /** The LISTEN's connection ended: listen again at once (the server may be back already), and claim meanwhile. */
  private lost(): void {
    this.relisten = true;
    this.o.listening(false);
    this.o.log.warn({ workerId: this.o.workerId }, "delivery worker: the LISTEN connection ended; listening again");
    this.notified("");
    if (this.o.lifecycle.running) void this.subscribe();
  }

  stopRetrying(): void {
    clearInterval(this.timer);
  }

  async close(): Promise<void> {
    if (this.subscribing) await this.subscribing;
    if (this.unlisten) await this.unlisten().catch(() => {});
  }
}
