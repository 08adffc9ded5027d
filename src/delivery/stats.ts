// What a delivery worker counts, in a file of its own: the recorder, the send pool and the
// worker that wires them all update it, and none of them may import the worker.
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
  /** Claimed deliveries handed back unsent because their webhook was deleted or disabled while they waited for a slot. */
  webhookReleased: number;
  /** Notices heard that a webhook changed (src/webhooks/changes.sql): its deliveries claimed before are read again before they start. */
  webhookChanges: number;
};
