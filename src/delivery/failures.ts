// How the delivery worker's parts (worker.ts) report trouble: one logger shape, error summaries
// that never dump query parameters, and one backoff for failed queries. The backoff is shared
// because the parts share the database: when it is down, the claim loop, the recorder and the
// maintenance timer all fail together and should all slow down together.

/** pino-compatible subset. */
export type Logger = {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
};

export const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

const MAX_DB_BACKOFF_MS = 5_000;

/**
 * A failed query is logged and retried after a growing pause (100 ms … 5 s); reconnecting is
 * the pg Pool's job. Any query that succeeds starts the pauses over.
 */
export class DbBackoff {
  private pauseMs = 0;
  private readonly listeners: (() => void)[] = [];

  constructor(
    private readonly log: Logger,
    private readonly workerId: string,
    private readonly stats: { dbErrors: number },
  ) {}

  /** Called on every failure (e.g. the LISTEN connection may have gone with the others). */
  onFailure(listener: () => void): void {
    this.listeners.push(listener);
  }

  /** Logs the failure; returns how long to pause before trying again. */
  failed(what: string, err: unknown): number {
    this.stats.dbErrors++;
    for (const listener of this.listeners) listener();
    this.pauseMs = Math.min(MAX_DB_BACKOFF_MS, this.pauseMs ? this.pauseMs * 2 : 100);
    this.log.error({ err: errorSummary(err), workerId: this.workerId, retryInMs: this.pauseMs }, `delivery worker: ${what} failed`);
    return this.pauseMs;
  }

  ok(): void {
    this.pauseMs = 0;
  }

  /** The pause after the latest failure; 0 once a query has succeeded since. */
  get pause(): number {
    return this.pauseMs;
  }
}

/** Enough to diagnose a failure, without dumping query parameters (which may hold bodies). */
export function errorSummary(err: unknown): { name?: string; code?: string; message: string } {
  const e = err as { name?: string; code?: string; message?: string };
  const message = (e?.message ?? String(err))
    .replace(/^\s*Invalid `[^`]*` invocation:/, "") // Prisma's preamble
    .replace(/\s+/g, " ")
    .trim();
  return { name: e?.name, code: e?.code, message: message.slice(0, 500) };
}
