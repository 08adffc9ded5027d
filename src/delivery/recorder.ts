// The delivery worker's result recorder (worker.ts). It owns every lease the worker holds, from
// the claim until the result is recorded: it renews them while the deliveries wait or are
// sent, gives them back (a breaker opened, the worker stops), and writes the attempts' results
// in batches, retrying the statement while the database is away. Leases and records are one
// part because their statements must take turns on the same rows (see renew()).
import type { Database } from "../db/client.ts";
import { type DbBackoff, errorSummary, type Logger } from "./failures.ts";
import type { Lifecycle } from "./lifecycle.ts";
import { applyStaged, recordResults, releaseLeases, renewLeases, type ClaimedDelivery, type DeliveryResult } from "./sql.ts";
import type { WorkerStats } from "./stats.ts";

/** Results not yet recorded beyond which no more is claimed (memory stays bounded). */
const MAX_UNRECORDED = 1_000;
const MAX_RECORD_BATCH = 500;
const RECORD_DELAY_MS = 10;
/**
 * How long after a record the dashboard's numbers it staged are added to the rollups
 * (dashboard.apply_staged): one apply covers every batch recorded meanwhile, by every worker.
 * The dashboard's reads add what is still staged themselves, so this only bounds the work they
 * find (src/delivery/charts.ts).
 */
const APPLY_STAGED_MS = 1_000;
/** The most staged batches one apply adds (dashboard.apply_staged): more wait for the next. */
const STAGED_PER_APPLY = 500;

export type RecorderOptions = {
  db: Database;
  workerId: string;
  leaseMs: number;
  /** A batch this full is recorded at once. */
  batchSize: number;
  log: Logger;
  stats: Pick<WorkerStats, "recorded" | "succeeded" | "retried" | "failed" | "gone" | "lostLeases" | "breakerReleased" | "webhookReleased">;
  backoff: DbBackoff;
  lifecycle: Lifecycle;
  /** Sends in flight now: with none, a result is recorded at once. */
  inFlight(): number;
  /** Results were applied: the database has per-webhook room again. */
  recorded(): void;
  /** A retry was recorded; it falls due in `delayMs`. */
  retryIn(delayMs: number): void;
};

export class Recorder {
  /**
   * Every delivery this worker leased and has not recorded yet (queued, sending, waiting to be
   * recorded, or handed back by abandon()): what it renews, and what a stop releases.
   */
  private readonly held = new Set<string>();
  private unrecorded: DeliveryResult[] = [];
  /** The batch whose statement is running. */
  private recording: DeliveryResult[] = [];
  private flushing: Promise<void> | null = null;
  private flushTimer: NodeJS.Timeout | null = null;
  private renewing: Promise<unknown> | null = null;
  private readonly renewTimer: NodeJS.Timeout;
  private applyTimer: NodeJS.Timeout | null = null;
  private applying: Promise<void> | null = null;

  constructor(private readonly o: RecorderOptions) {
    this.renewTimer = setInterval(() => this.renew(), Math.max(50, Math.floor(o.leaseMs / 3)));
    this.renewTimer.unref();
  }

  /** Results waiting to be recorded. */
  get waiting(): number {
    return this.unrecorded.length + this.recording.length;
  }

  /** Too many results wait (e.g. the database is unreachable): claim nothing more. */
  get full(): boolean {
    return this.waiting >= MAX_UNRECORDED;
  }

  hold(claimed: ClaimedDelivery[]): void {
    for (const c of claimed) this.held.add(c.deliveryId);
  }

  add(result: DeliveryResult): void {
    this.unrecorded.push(result);
    this.scheduleFlush();
  }

  /**
   * Gives back leases without an attempt: the deliveries stay due, first in line, for whoever
   * may send to their endpoint (a disabled webhook's wait, pending, until it is enabled; a
   * deleted one's are gone, and there is nothing to release). Should the release fail, the
   * leases are no longer renewed and run out instead.
   */
  handBack(deliveryIds: string[], why: "breaker" | "webhook"): void {
    for (const d of deliveryIds) this.held.delete(d);
    if (why === "breaker") this.o.stats.breakerReleased += deliveryIds.length;
    else this.o.stats.webhookReleased += deliveryIds.length;
    releaseLeases(this.o.db, this.o.workerId, deliveryIds).catch((err) => this.o.backoff.failed("handing back claims", err));
  }

  /** Records everything waiting; results arriving meanwhile form the next batch. */
  flush(): Promise<void> {
    if (!this.flushing && this.unrecorded.length > 0) this.flushing = this.recordAll();
    return this.flushing ?? Promise.resolve();
  }

  stopRenewing(): void {
    clearInterval(this.renewTimer);
  }

  /** On the way out: a few tries within `withinMs`, since the database may be why we stop. */
  async recordRemaining(withinMs: number): Promise<void> {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    const deadline = Date.now() + withinMs;
    if (this.flushing) await this.flushing;
    while (this.unrecorded.length > 0 && Date.now() < deadline) {
      await this.flush();
      if (this.unrecorded.length > 0) await new Promise((r) => setTimeout(r, Math.min(this.o.backoff.pause || 100, 1_000)));
    }
    if (this.unrecorded.length > 0) {
      this.o.log.warn({ workerId: this.o.workerId, results: this.unrecorded.length }, "delivery worker: results not recorded; those deliveries will be sent again");
    }
  }

  /** On the way out, after recordRemaining: adds what this worker staged, if anything (best effort). */
  async applyRemaining(): Promise<void> {
    if (!this.applyTimer) return this.applying ?? undefined;
    clearTimeout(this.applyTimer);
    this.applyTimer = null;
    await this.applyNow();
  }

  /** Gives back every lease still held (unsent or unrecorded); how many were released. */
  async releaseAll(): Promise<number> {
    try {
      await this.renewing;
      return await releaseLeases(this.o.db, this.o.workerId, [...this.held]);
    } catch (err) {
      this.o.backoff.failed("releasing leases", err);
      return 0;
    }
  }

  /**
   * Lease renewals skip the deliveries whose results are waiting to be recorded, and a record
   * waits for a renewal under way: the two statements never update the same rows at once. They
   * used to, from two pool connections, each locking its rows in its own order, and a chaos run
   * ended a record batch in "deadlock detected" (retried, so nothing was lost).
   */
  private renew(): void {
    if (this.renewing || !this.o.lifecycle.running) return;
    const { db, workerId, leaseMs, log, backoff } = this.o;
    const waiting = new Set([...this.recording, ...this.unrecorded].map((r) => r.deliveryId));
    const ids = [...this.held].filter((d) => !waiting.has(d));
    if (ids.length === 0) return;
    this.renewing = renewLeases(db, workerId, ids, leaseMs)
      .then(
        (kept) => {
          if (kept.length < ids.length) log.debug({ workerId, lost: ids.length - kept.length }, "delivery worker: some leases were not renewed");
        },
        (err) => backoff.failed("renewing leases", err),
      )
      .finally(() => (this.renewing = null));
  }

  /**
   * Results are recorded in batches: at once when a batch is full or nothing else is being
   * sent, otherwise after RECORD_DELAY_MS so the results of sends finishing together share one
   * statement (on PGlite, which runs in this thread, they would otherwise go one by one).
   */
  private scheduleFlush(): void {
    if (this.flushing) return; // the running flush picks them up
    if (this.unrecorded.length >= this.o.batchSize || this.o.inFlight() === 0 || !this.o.lifecycle.running) {
      if (this.flushTimer) clearTimeout(this.flushTimer);
      this.flushTimer = null;
      void this.flush();
    } else {
      this.flushTimer ??= setTimeout(() => {
        this.flushTimer = null;
        void this.flush();
      }, RECORD_DELAY_MS);
    }
  }

  private async recordAll(): Promise<void> {
    try {
      while (this.unrecorded.length > 0) {
        if (!(await this.recordBatch())) return;
      }
    } catch (err) {
      // Not a database error (recordBatch handles those): keep the results for the next flush.
      this.unrecorded = this.recording.concat(this.unrecorded);
      this.recording = [];
      this.o.log.error({ err: errorSummary(err), workerId: this.o.workerId }, "delivery worker: recording crashed");
    } finally {
      this.flushing = null;
    }
  }

  /** One statement's worth; false when it failed on the way out (the shutdown retries it). */
  private async recordBatch(): Promise<boolean> {
    const { db, workerId, backoff, lifecycle } = this.o;
    this.recording = this.unrecorded.slice(0, MAX_RECORD_BATCH);
    this.unrecorded = this.unrecorded.slice(this.recording.length);
    let applied: Set<string>;
    try {
      await this.renewing;
      applied = new Set(await recordResults(db, workerId, this.recording));
      backoff.ok();
      this.scheduleApply();
    } catch (err) {
      this.unrecorded = this.recording.concat(this.unrecorded);
      this.recording = [];
      const pause = backoff.failed("recording results", err);
      if (!lifecycle.running) return false; // recordRemaining() retries with its own deadline
      await lifecycle.sleep(pause);
      return true;
    }
    this.settle(this.recording, applied);
    this.recording = [];
    // Recorded results free per-webhook room in the database (a claim held back by the cap
    // returns fewer rows than asked, so "not a full batch" does not mean "nothing due").
    if (applied.size > 0) this.o.recorded();
    return true;
  }

  /** A record staged the dashboard's numbers of its batch: add them within APPLY_STAGED_MS. */
  private scheduleApply(): void {
    if (this.applyTimer) return;
    this.applyTimer = setTimeout(() => {
      this.applyTimer = null;
      void this.applyNow();
    }, APPLY_STAGED_MS);
    this.applyTimer.unref();
  }

  /**
   * Adds staged numbers to the rollups. A failure only delays them (they stay staged, the next
   * record schedules another apply, and the dashboard's reads add them anyway): it does not
   * hold up deliveries.
   */
  private applyNow(): Promise<void> {
    this.applying ??= applyStaged(this.o.db, false)
      .then(
        (applied) => {
          if (applied === STAGED_PER_APPLY && this.o.lifecycle.running) this.scheduleApply();
        },
        (err) => {
          this.o.log.warn({ err: errorSummary(err), workerId: this.o.workerId }, "delivery worker: could not add staged numbers to the dashboard's rollups");
          if (this.o.lifecycle.running) this.scheduleApply();
        },
      )
      .finally(() => (this.applying = null));
    return this.applying;
  }

  /** The leases of a recorded batch are gone; counts what each result did. */
  private settle(batch: DeliveryResult[], applied: Set<string>): void {
    const { stats, log, workerId } = this.o;
    for (const r of batch) {
      this.held.delete(r.deliveryId);
      stats.recorded++;
      if (!applied.has(r.deliveryId)) {
        stats.lostLeases++;
        log.warn({ deliveryId: r.deliveryId, attempt: r.attempt, workerId }, "delivery worker: lease lost before the result was recorded");
        continue;
      }
      if (r.status === "pending") {
        stats.retried++;
        this.o.retryIn(r.delayMs ?? 0);
      } else stats[r.status]++;
    }
  }
}
