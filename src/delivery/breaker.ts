// Per-endpoint concurrency with a circuit breaker, kept in each worker's memory.
//
// Why: the claim's per-webhook cap (sql.ts) bounds one webhook's leases, but not the time they
// hold a send slot. Three receivers that never answer, at the cap of 20 each, held 60 slots
// for the whole timeout on a worker with 50, and a healthy webhook's deliveries waited behind
// them. Here every endpoint earns its concurrency by answering:
// * closed: up to `limit` deliveries at a time. A new (or long idle) endpoint starts at
//   INITIAL_LIMIT, so unknown endpoints together cannot fill the worker's slots before any of
//   them has answered; each prompt answer adds one (up to the cap), an answer slower than half
//   the timeout takes one away, a failure halves it (at least one).
// * open: after `failures` stalled attempts in a row nothing is sent for `openMs` (doubled
//   after every stalled probe, up to `maxOpenMs`); its due deliveries stay pending in the
//   database and take no slot, since the claim asks for none of them.
// * half-open: once that time has passed, one probe delivery at a time. Any answer in time
//   closes the breaker again (at limit 1, growing as above); a stalled probe reopens it.
// A failure is an attempt that reached the network and got no usable answer: a timeout, a
// connection refused or reset, a 429 or a 5xx. It is stalled when it also took more than half
// the timeout: that is what holds a send slot, so only that opens the breaker. A receiver that
// fails at once (a quick 500, a refused connection) holds a slot for milliseconds; it is held
// to one delivery at a time by the halving and left to the retry schedule (opening on quick
// failures would also delay retries the schedule promises, e.g. 1 s apart in the tests).
// Other answers (2xx, 4xx, 410) mean the endpoint is there. Attempts that never reached it
// (refused target, undecryptable secret) say nothing about it, unless resolving its host took
// more than half the timeout: that stalls as a receiver that never answers does. None of this touches a
// delivery's own schedule: every attempt is recorded with its retry time as before; the
// breaker only decides how many of the due ones this worker takes.
//
// The state is per worker process: each worker learns an endpoint on its own (at most
// `failures` attempts, then one probe at a time per worker). Sharing it through the database
// would put a write on every attempt for what a few attempts teach each worker anyway.

/** Concurrency of an endpoint this worker has no recent answer from. */
export const INITIAL_LIMIT = 4;
/** An endpoint idle (nothing in flight, breaker closed) this long is forgotten: it starts over. */
const FORGET_AFTER_MS = 60_000;
/** Entries kept at most; beyond it the idle ones are forgotten at once. */
const MAX_ENTRIES = 10_000;

export type BreakerSettings = {
  /** Stalled attempts in a row that open the breaker. */
  failures: number;
  /** How long it stays open the first time; doubles after each stalled probe. */
  openMs: number;
  /** The longest it stays open. */
  maxOpenMs: number;
};
export const DEFAULT_BREAKER: BreakerSettings = { failures: 5, openMs: 1_000, maxOpenMs: 60_000 };

/** What one attempt says about its endpoint. */
export type Verdict = "answered" | "slow" | "failed" | "stalled" | "neutral";

export type BreakerState = "closed" | "open" | "half-open";

/** A state change, for the log. */
export type Transition = { webhookId: string; from: BreakerState; to: BreakerState; openMs?: number; failures: number };

type Entry = {
  state: BreakerState;
  limit: number;
  /** Claimed by this worker and not finished: queued or sending. */
  active: number;
  failuresInRow: number;
  /** While open: when the probe may go. */
  openUntil: number;
  /** The next open period. */
  nextOpenMs: number;
  lastUsed: number;
};

/** The verdict of one attempt on its endpoint. `reached`: a request went out (SendResult.reached). */
export function verdictOf(sent: { statusCode: number | null; durationMs: number; reached: boolean }, timeoutMs: number): Verdict {
  const slow = sent.durationMs > timeoutMs / 2;
  // Before the request, only resolving the host takes time: a name that takes more than half
  // the timeout holds a slot as a receiver that never answers does (30th review)
  if (!sent.reached) return slow ? "stalled" : "neutral";
  const s = sent.statusCode;
  if (s === null || s === 429 || s >= 500) return slow ? "stalled" : "failed";
  return slow ? "slow" : "answered";
}

export class EndpointBreakers {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly cap: number,
    private readonly settings: BreakerSettings = DEFAULT_BREAKER,
    private readonly onTransition: (t: Transition) => void = () => {},
  ) {}

  /** How many more of this endpoint's deliveries this worker may claim now. */
  room(webhookId: string, now: number): number {
    const e = this.entries.get(webhookId);
    if (!e) return Math.min(INITIAL_LIMIT, this.cap);
    this.promote(webhookId, e, now);
    if (e.state === "open") return 0;
    const limit = e.state === "half-open" ? 1 : e.limit;
    return Math.max(0, limit - e.active);
  }

  /** False while the breaker is open: a delivery already claimed should be handed back, not sent. */
  mayStart(webhookId: string, now: number): boolean {
    const e = this.entries.get(webhookId);
    if (!e) return true;
    this.promote(webhookId, e, now);
    return e.state !== "open";
  }

  /** A delivery of this endpoint was claimed (it counts until finished()). */
  taken(webhookId: string, now: number): void {
    const e = this.entry(webhookId, now);
    e.active++;
    e.lastUsed = now;
  }

  /** A claimed delivery is done with: sent (with its verdict) or handed back unsent (null). */
  finished(webhookId: string, verdict: Verdict | null, now: number): void {
    const e = this.entry(webhookId, now);
    e.active = Math.max(0, e.active - 1);
    e.lastUsed = now;
    if (verdict === null || verdict === "neutral") return;
    if (verdict === "stalled") this.stalled(webhookId, e, now);
    else this.answered(webhookId, e, verdict);
  }

  /**
   * What the claim needs: the room of every endpoint whose room differs from that of an
   * unknown endpoint (`otherwise`). Forgets idle entries on the way.
   */
  claimRooms(now: number): { webhookIds: string[]; rooms: number[]; otherwise: number } {
    const otherwise = Math.min(INITIAL_LIMIT, this.cap);
    const webhookIds: string[] = [];
    const rooms: number[] = [];
    const crowded = this.entries.size > MAX_ENTRIES;
    for (const [id, e] of this.entries) {
      if (e.active === 0 && e.state === "closed" && (crowded || now - e.lastUsed > FORGET_AFTER_MS)) {
        this.entries.delete(id);
        continue;
      }
      const room = this.room(id, now);
      if (room !== otherwise) {
        webhookIds.push(id);
        rooms.push(room);
      }
    }
    return { webhookIds, rooms, otherwise };
  }

  /** When the earliest open breaker lets a probe go (Infinity if none is open). */
  nextProbeAt(): number {
    let at = Infinity;
    for (const e of this.entries.values()) if (e.state === "open" && e.openUntil < at) at = e.openUntil;
    return at;
  }

  /** For tests and logs. */
  stateOf(webhookId: string, now: number): { state: BreakerState; limit: number; active: number } {
    const e = this.entries.get(webhookId);
    if (!e) return { state: "closed", limit: Math.min(INITIAL_LIMIT, this.cap), active: 0 };
    this.promote(webhookId, e, now);
    return { state: e.state, limit: e.state === "closed" ? e.limit : e.state === "half-open" ? 1 : 0, active: e.active };
  }

  private entry(webhookId: string, now: number): Entry {
    let e = this.entries.get(webhookId);
    if (!e) {
      e = { state: "closed", limit: Math.min(INITIAL_LIMIT, this.cap), active: 0, failuresInRow: 0, openUntil: 0, nextOpenMs: this.settings.openMs, lastUsed: now };
      this.entries.set(webhookId, e);
    }
    return e;
  }

  /** Open → half-open once its time has passed. */
  private promote(webhookId: string, e: Entry, now: number): void {
    if (e.state === "open" && now >= e.openUntil) this.move(webhookId, e, "half-open");
  }

  /** The endpoint replied in time (a quick failure included): it is there. */
  private answered(webhookId: string, e: Entry, verdict: "answered" | "slow" | "failed"): void {
    if (verdict !== "failed") e.failuresInRow = 0;
    if (e.state !== "closed") {
      // The probe's answer, or a straggler's sent before the breaker opened.
      e.limit = 1;
      e.nextOpenMs = this.settings.openMs;
      this.move(webhookId, e, "closed");
      return;
    }
    if (verdict === "answered") e.limit = Math.min(this.cap, e.limit + 1);
    else if (verdict === "slow") e.limit = Math.max(1, e.limit - 1);
    else e.limit = Math.max(1, Math.floor(e.limit / 2));
  }

  private stalled(webhookId: string, e: Entry, now: number): void {
    e.failuresInRow++;
    if (e.state === "open") return; // a straggler sent before it opened
    if (e.state === "half-open" || e.failuresInRow >= this.settings.failures) {
      const openMs = e.nextOpenMs;
      e.openUntil = now + openMs;
      e.nextOpenMs = Math.min(this.settings.maxOpenMs, openMs * 2);
      this.move(webhookId, e, "open", openMs);
      return;
    }
    e.limit = Math.max(1, Math.floor(e.limit / 2));
  }

  private move(webhookId: string, e: Entry, to: BreakerState, openMs?: number): void {
    const from = e.state;
    e.state = to;
    this.onTransition({ webhookId, from, to, openMs, failures: e.failuresInRow });
  }
}
