// The delivery worker's send pool (worker.ts): claimed deliveries wait here for one of
// `concurrency` send slots, go out through the sender and come back as results to record.
// Each endpoint's breaker (breaker.ts) is kept here, since the pool is what sees every
// attempt: it decides how many of an endpoint's deliveries may be claimed and whether a queued
// one may still start, and learns from how each attempt went.
import { setMaxListeners } from "node:events";
import { newOrderedId } from "../ids.ts";
import type { Config } from "../config.ts";
import { unseal, type MasterKey } from "../crypto.ts";
import { recordDelivery, type DeliveryOutcome } from "../metrics.ts";
import { liveSecrets, type LiveSecrets } from "../webhooks/signing.ts";
import type { LookupFn } from "../webhooks/target-guard.ts";
import { DEFAULT_BREAKER, EndpointBreakers, verdictOf, type BreakerSettings, type Transition } from "./breaker.ts";
import { errorSummary, type Logger } from "./failures.ts";
import type { Lifecycle } from "./lifecycle.ts";
import { decide } from "./schedule.ts";
import { createSender, secretRef, type Sender, type SendResult } from "./sender.ts";
import type { ClaimedDelivery, DeliveryResult, ProjectLoads, WebhookNow } from "./sql.ts";

/**
 * A claimed delivery that has waited longer than this for a send slot has its webhook read again
 * before it starts (recheck below): the claim's copy of the URL and secrets may be out of date
 * by then, and the webhook deleted or disabled. Waits that long come only from sends that hold
 * their slots (slow receivers, up to the webhook timeout), which allow a few hundred sends a
 * second at most: a read per pump is nothing beside them. A drain at full speed (the delivery
 * benchmark: 10,000 deliveries at ~10,000/s, 50 in flight, a batch of 50 waiting) starts each
 * delivery a few milliseconds after its claim and must not pay a read per delivery, so the bound
 * is two orders of magnitude above that wait.
 *
 * A shorter wait is covered by the change's notice instead: every change of a webhook that
 * matters here NOTIFYs the workers as it commits (src/webhooks/changes.sql), and a delivery
 * claimed before its worker heard that its webhook changed is read again whatever its wait.
 * Webhooks change a few times a day, so a drain reads nothing. What still goes as claimed (or
 * as last read): a delivery started before the notice reached its worker (a few milliseconds
 * after the commit), as one already sending does, or whose webhook was being read again as the
 * change committed (the read's round trip), and, while the worker's LISTEN is down (it logs a
 * warning), one that waited less than this.
 */
export const RECHECK_AFTER_MS = 250;

export type SendPoolOptions = {
  /** Most sends in flight. */
  concurrency: number;
  /** How many claimed deliveries may wait for a slot besides: one batch (worker.ts, pipelining). */
  prefetch: number;
  perWebhookCap: number;
  config: Pick<Config, "retryScheduleMs" | "webhookTimeoutMs" | "webhookAllowPrivate"> & { webhookBreaker?: Partial<BreakerSettings> };
  masterKey: MasterKey;
  lookup?: LookupFn;
  random: () => number;
  workerId: string;
  log: Logger;
  lifecycle: Lifecycle;
  /** An attempt's result, to be recorded. */
  result(result: DeliveryResult): void;
  /**
   * Claimed deliveries given back unsent: their endpoint's breaker opened meanwhile, or their
   * webhook was deleted or disabled (`why`).
   */
  handBack(deliveryIds: string[], why: "breaker" | "webhook"): void;
  /** Queued longer than this, a delivery's webhook is read again before it starts (RECHECK_AFTER_MS by default). */
  recheckAfterMs: number;
  /** The webhooks of these deliveries as they are now (sql.ts webhooksNow); null when the read failed (reported by the caller). */
  webhooksNow(claimed: ClaimedDelivery[]): Promise<Map<string, WebhookNow> | null>;
  /** A send has finished: its slot is free. */
  slotFreed(): void;
  /** An endpoint's breaker opened: its probe may go in `openMs`. */
  probeIn(openMs: number): void;
};

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

export class SendPool {
  readonly breakers: EndpointBreakers;
  /** In-flight sends that abandon() cut short: handed back with the worker's other leases. */
  abandonedSends = 0;
  /** Claimed, leased, not started yet: the next sends start from here without a round trip. */
  private readonly queued: ClaimedDelivery[] = [];
  /** Taken from the queue, each with its send slot, while their webhooks are read again (recheck). */
  private checking: ClaimedDelivery[] = [];
  /** In flight, by delivery id. */
  private readonly sending = new Map<string, ClaimedDelivery>();
  private readonly sender: Sender;
  private readonly secrets: SecretCache;
  private readonly abort = new AbortController();
  private abandoned = false;
  private drained: (() => void) | null = null;
  /**
   * performance.now() since when this worker hears every webhook change (its LISTEN is up); null
   * while it is down. A delivery claimed before then may have missed a change: read again.
   */
  private listeningSince: number | null = null;
  /**
   * performance.now() when this worker last heard that a webhook changed, by webhook. Kept for
   * recheckAfterMs: a delivery claimed before an older notice has waited long enough to be read
   * again anyway.
   */
  private readonly changedAt = new Map<string, number>();

  constructor(private readonly o: SendPoolOptions) {
    const { config } = o;
    this.sender = createSender({ timeoutMs: config.webhookTimeoutMs, allowPrivate: config.webhookAllowPrivate, lookup: o.lookup });
    this.secrets = new SecretCache(o.masterKey);
    setMaxListeners(0, this.abort.signal); // one listener per send in flight
    this.breakers = new EndpointBreakers(o.perWebhookCap, { ...DEFAULT_BREAKER, ...config.webhookBreaker }, (t) => this.breakerMoved(t));
  }

  get inFlight(): number {
    return this.sending.size;
  }

  get waiting(): number {
    return this.queued.length + this.checking.length;
  }

  /** How many more deliveries the pool can take on: its free slots and one batch to wait. */
  get room(): number {
    return this.o.concurrency + this.o.prefetch - this.sending.size - this.waiting;
  }

  /** The deliveries this worker holds per project, sending or waiting for a slot: what its next turns in a claim start after (sql.ts claimDue). */
  projectLoads(): ProjectLoads {
    const loads = new Map<string, number>();
    for (const c of [...this.sending.values(), ...this.checking, ...this.queued]) loads.set(c.projectId, (loads.get(c.projectId) ?? 0) + 1);
    return { projectIds: [...loads.keys()], loads: [...loads.values()] };
  }

  /** Claimed deliveries count against their endpoints from the moment they are leased. */
  taken(claimed: ClaimedDelivery[]): void {
    const now = Date.now();
    for (const c of claimed) this.breakers.taken(c.webhookId, now);
  }

  take(claimed: ClaimedDelivery[]): void {
    this.queued.push(...claimed);
    this.pump();
  }

  /** A webhook changed (src/webhooks/changes.sql): its deliveries claimed before now are read again before they start. */
  webhookChanged(webhookId: string): void {
    const now = performance.now();
    for (const [id, at] of this.changedAt) if (now - at > this.o.recheckAfterMs) this.changedAt.delete(id);
    this.changedAt.set(webhookId, now);
  }

  /** The worker's LISTEN is up (every change from now on is heard) or down. */
  listening(up: boolean): void {
    this.listeningSince = up ? performance.now() : null;
  }

  /** Whether `c`'s webhook may have changed since its claim, as of `at` (performance.now()): then it is read again before `c` starts. */
  private mayHaveChanged(c: ClaimedDelivery, at: number): boolean {
    if (at - c.claimedAt > this.o.recheckAfterMs) return true;
    if (this.listeningSince !== null && c.claimedAt < this.listeningSince) return true;
    const changed = this.changedAt.get(c.webhookId);
    return changed !== undefined && changed >= c.claimedAt;
  }

  /**
   * On the way out: the queued deliveries are never started (their leases are released), nor
   * are those being checked when their read comes back (recheck).
   */
  dropQueued(): void {
    this.queued.length = 0;
  }

  /** Resolves when every send has finished; those still running after `abortAfterMs` are aborted. */
  async drain(abortAfterMs: number): Promise<void> {
    if (this.sending.size === 0) return;
    const allDone = new Promise<void>((resolve) => (this.drained = resolve));
    const timer = setTimeout(() => this.abort.abort(new Error("worker stopping")), abortAfterMs);
    await allDone;
    clearTimeout(timer);
  }

  /** Aborts the sends in flight; they come back without an attempt to record. */
  abandon(): void {
    this.abandoned = true;
    this.abort.abort(new Error("worker abandoned its in-flight sends"));
  }

  close(): Promise<void> {
    return this.sender.close();
  }

  /**
   * Starts queued deliveries while send slots are free (never once stopping). Those whose
   * endpoint's breaker opened since they were claimed are handed back instead. Those whose
   * webhook may have changed since their claim (mayHaveChanged: they waited longer than
   * `recheckAfterMs`, or the worker heard of a change) take their slots and start once their
   * webhooks have been read again, all in one read (recheck); while that read is under way,
   * nothing behind them starts: it pumps again when it is in.
   */
  private pump(): void {
    const now = Date.now();
    const at = performance.now();
    const back: string[] = [];
    const stale: ClaimedDelivery[] = [];
    while (this.o.lifecycle.running && this.sending.size + this.checking.length + stale.length < this.o.concurrency && this.queued.length > 0) {
      const changed = this.mayHaveChanged(this.queued[0], at);
      if (changed && this.checking.length > 0) break;
      const c = this.queued.shift()!;
      if (changed) stale.push(c);
      else if (this.breakers.mayStart(c.webhookId, now)) this.start(c);
      else {
        this.breakers.finished(c.webhookId, null, now);
        back.push(c.deliveryId);
      }
    }
    if (back.length > 0) this.o.handBack(back, "breaker");
    if (stale.length > 0) void this.recheck(stale);
  }

  /**
   * Starts deliveries whose webhooks may have changed with their webhooks as they are now: to the
   * URL they have now, signed with the secrets they have now. Those of a webhook deleted meanwhile
   * (the deliveries went with it) or disabled (they wait, pending, until it is enabled again:
   * docs/webhooks.md) are handed back unsent, and so are those whose breaker opened during the
   * read, as in pump(). Should the read fail, they go as claimed, as they did before the read
   * was made: a database outage must not hold up deliveries.
   */
  private async recheck(claimed: ClaimedDelivery[]): Promise<void> {
    this.checking = claimed;
    const webhooks = await this.o.webhooksNow(claimed).catch(() => null);
    this.checking = [];
    // Stopping: they are still held, and the shutdown releases them with the worker's other leases.
    if (!this.o.lifecycle.running) return;
    const now = Date.now();
    const off: string[] = [];
    const back: string[] = [];
    for (const c of claimed) {
      const w = webhooks?.get(c.webhookId);
      if (webhooks && !w?.enabled) {
        this.breakers.finished(c.webhookId, null, now);
        off.push(c.deliveryId);
      } else if (!this.breakers.mayStart(c.webhookId, now)) {
        this.breakers.finished(c.webhookId, null, now);
        back.push(c.deliveryId);
      } else {
        if (w) {
          c.url = w.url;
          c.secretSealed = w.secretSealed;
          c.previousSecretSealed = w.previousSecretSealed;
          c.previousSecretExpiresAt = w.previousSecretExpiresAt;
        }
        this.start(c);
      }
    }
    if (off.length > 0) {
      this.o.log.debug({ workerId: this.o.workerId, deliveries: off.length }, "delivery worker: handing back claims whose webhook was deleted or disabled since");
      this.o.handBack(off, "webhook");
    }
    if (back.length > 0) this.o.handBack(back, "breaker");
    this.pump();
    // Slots the hand-backs left free may be worth a claim.
    if (off.length + back.length > 0) this.o.slotFreed();
  }

  private start(c: ClaimedDelivery): void {
    this.sending.set(c.deliveryId, c);
    void this.attempt(c).then((result) => {
      this.sending.delete(c.deliveryId);
      if (result) this.o.result(result);
      else this.abandonedSends++;
      this.pump();
      this.o.slotFreed();
      if (this.sending.size === 0) this.drained?.();
    });
  }

  /** The attempt's result, or null when abandon() cut the send short (nothing to record). */
  private async attempt(c: ClaimedDelivery): Promise<DeliveryResult | null> {
    const signing = this.signing(c);
    let sent: SendResult | null;
    if (!signing) sent = internalFailure("internal: the webhook secret could not be decrypted");
    else sent = await this.send(c, signing.secrets);
    if (sent === null) {
      this.breakers.finished(c.webhookId, null, Date.now());
      return null;
    }
    return this.outcome(c, sent, signing?.refs ?? []);
  }

  /** The secrets live now, and the refs the attempt log names them by; null if they cannot be opened. */
  private signing(c: ClaimedDelivery): { secrets: LiveSecrets; refs: string[] } | null {
    try {
      const current = this.secrets.open(c.secretSealed);
      const previous = c.previousSecretSealed ? this.secrets.open(c.previousSecretSealed) : null;
      const secrets = liveSecrets(
        { secret: current.plain, previousSecret: previous?.plain ?? null, previousSecretExpiresAt: c.previousSecretExpiresAt },
        new Date(),
      );
      return { secrets, refs: secrets.previous ? [current.ref, previous!.ref] : [current.ref] };
    } catch (err) {
      // Never log the sealed or plain secret; a wrong LINKGATE_SECRET_KEY is the usual cause.
      this.o.log.error({ err: errorSummary(err), deliveryId: c.deliveryId, webhookId: c.webhookId }, "delivery worker: cannot unseal the webhook secret");
      return null;
    }
  }

  /** The sender's result; null when abandon() cut it short. */
  private async send(c: ClaimedDelivery, secrets: LiveSecrets): Promise<SendResult | null> {
    try {
      const sent = await this.sender.send(
        { url: c.url, body: c.body, eventId: c.eventId, eventType: c.eventType, attempt: c.attempt, secrets },
        this.abort.signal,
      );
      // Cut short by abandon(): not the receiver's fault, so not an attempt; the release of the
      // worker's leases hands the delivery back untouched.
      return this.abandoned && sent.statusCode === null ? null : sent;
    } catch (err) {
      // sender.send reports every network outcome as a result; this is a bug, not a receiver's fault.
      this.o.log.error({ err: errorSummary(err), deliveryId: c.deliveryId }, "delivery worker: send failed unexpectedly");
      return internalFailure(`internal: ${errorSummary(err).message}`);
    }
  }

  /** What the attempt means for the endpoint, the delivery and the metrics. */
  private outcome(c: ClaimedDelivery, sent: SendResult, refs: string[]): DeliveryResult {
    const { config, random, log } = this.o;
    this.breakers.finished(c.webhookId, verdictOf(sent, config.webhookTimeoutMs), Date.now());
    const decision = decide({ attempt: c.attempt, statusCode: sent.statusCode, retryAfter: sent.retryAfter }, config.retryScheduleMs, { random });
    report(decision.status, c, sent);
    log.debug(
      { deliveryId: c.deliveryId, eventId: c.eventId, webhookId: c.webhookId, attempt: c.attempt, status: sent.statusCode, error: sent.error, outcome: decision.status, durationMs: sent.durationMs },
      "delivery attempt",
    );
    return {
      deliveryId: c.deliveryId,
      attemptId: newOrderedId("att"),
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

  private breakerMoved(t: Transition): void {
    const fields = { event: `webhook.breaker.${t.to}`, webhookId: t.webhookId, from: t.from, failuresInRow: t.failures, openMs: t.openMs, workerId: this.o.workerId };
    if (t.to === "open") {
      this.o.log.warn(fields, "webhook breaker opened: no deliveries to this endpoint until a probe answers");
      this.o.probeIn(t.openMs ?? 0); // the probe goes when it falls due, not at the next poll
    } else this.o.log.info(fields, `webhook breaker ${t.to}`);
  }
}

/** Every attempt to the metrics, with commit → 2xx for a success (both on this clock's terms). */
function report(status: DeliveryResult["status"], c: ClaimedDelivery, sent: SendResult): void {
  const outcome: DeliveryOutcome = status === "pending" ? "retried" : status;
  recordDelivery(outcome, status === "succeeded" ? Math.max(0, sent.startedAt.getTime() + sent.durationMs - c.eventCreatedMs) : undefined);
}

/**
 * Webhook secrets, unsealed once per sealed value (a rotation seals a new value, so a stale
 * entry is never used), with the ref the attempt log names them by. Unsealing derives the
 * key with HKDF every time: ~50 µs, a tenth of a delivery's CPU when done per attempt.
 * Bounded; the oldest entry goes first.
 */
class SecretCache {
  private readonly unsealed = new Map<string, { plain: string; ref: string }>();
  constructor(private readonly masterKey: MasterKey) {}
  open(sealed: string): { plain: string; ref: string } {
    let secret = this.unsealed.get(sealed);
    if (secret === undefined) {
      const plain = unseal(this.masterKey, sealed);
      secret = { plain, ref: secretRef(plain) };
      this.unsealed.set(sealed, secret);
      if (this.unsealed.size > 10_000) this.unsealed.delete(this.unsealed.keys().next().value!);
    }
    return secret;
  }
}
