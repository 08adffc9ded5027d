// The delivery worker's lifecycle (worker.ts): the state it is in, and the one place that moves
// it from one state to the next. stop() and abandon() arrive in any order and at any moment: a
// signal handler calls stop(), then abandon() once the shutdown deadline passes, while stop()
// may still be waiting for sends (src/lifecycle.ts). So each transition is a switch over every
// state with a `never` default, as graphile-worker's LocalQueue does with its modes: a new
// state does not compile until every transition says what happens in it.
//
//   running     claims, sends and records.
//   stopping    stop(): claims nothing more, lets the sends in flight finish (bounded by the
//               webhook timeout), records their results and releases every other lease.
//   abandoning  abandon(), from running or stopping: the same, except that the sends in flight
//               are aborted at once and handed back without counting an attempt.
//   stopped     all of that is done; stop() and abandon() resolve at once.

export type WorkerState = "running" | "stopping" | "abandoning" | "stopped";

export type LifecycleHooks = {
  /** Everything a stop does (worker.ts); the state is `stopped` once it settles. */
  shutdown(): Promise<void>;
  /** Cuts the sends in flight short (send-pool.ts). */
  abandonSends(): void;
};

export class Lifecycle {
  private current: WorkerState = "running";
  /** The shutdown, from the first stop() or abandon() on. */
  private done: Promise<void> | null = null;
  private readonly sleepers = new Set<() => void>();

  constructor(private readonly hooks: LifecycleHooks) {}

  get state(): WorkerState {
    return this.current;
  }

  /** Only a running worker takes on work: claims, sends, lease renewals, maintenance. */
  get running(): boolean {
    return this.current === "running";
  }

  stop(): Promise<void> {
    switch (this.current) {
      case "running":
        this.current = "stopping";
        return this.shutDown();
      case "stopping":
      case "abandoning":
      case "stopped":
        return this.done!;
      default:
        return unreachable(this.current);
    }
  }

  abandon(): Promise<void> {
    switch (this.current) {
      case "running":
        this.current = "abandoning";
        this.hooks.abandonSends();
        return this.shutDown();
      case "stopping":
        // The shutdown under way now waits only for the aborted sends to come back.
        this.current = "abandoning";
        this.hooks.abandonSends();
        return this.done!;
      case "abandoning":
      case "stopped":
        // Nothing is in flight any more, or it is being aborted already.
        return this.done!;
      default:
        return unreachable(this.current);
    }
  }

  /** A pause that leaving `running` cuts short (a backoff must not hold up a stop). */
  sleep(ms: number): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.sleepers.delete(done);
        resolve();
      };
      const t = setTimeout(done, ms);
      this.sleepers.add(done);
    });
  }

  private shutDown(): Promise<void> {
    for (const wake of [...this.sleepers]) wake();
    this.done = this.hooks.shutdown().finally(() => {
      this.current = "stopped";
    });
    return this.done;
  }
}

function unreachable(state: never): never {
  throw new Error(`delivery worker: unknown state ${String(state)}`);
}
