// What the three commands (`npm start`, `npm run worker`, `npm run db:migrate`) share about
// starting and stopping: a configuration or database fault at start is one line on stderr and
// exit code 1, never a stack trace; SIGTERM/SIGINT drain within a hard deadline.
import { createServer } from "node:net";
import pg from "pg";
import { ConfigError, loadConfig, type Config } from "./config.ts";
import { flushStdio, guardStdio, type Logger } from "./log.ts";

/** How long releasing in-flight work may take once the shutdown deadline has passed. */
export const RELEASE_GRACE_MS = 5_000;
/** How long a first connection to Postgres may take at start. */
const CONNECT_TIMEOUT_MS = 10_000;

/** Flushes what stdout and stderr still hold (bounded), then exits. */
export async function exitProcess(code: number): Promise<never> {
  await flushStdio().catch(() => {});
  process.exit(code);
}

/** The message on stderr, prefixed "linkgate: ", then exit code 1. No stack trace. */
export async function die(message: string): Promise<never> {
  guardStdio();
  try {
    process.stderr.write(`linkgate: ${message}\n`);
  } catch {
    // stderr is gone too: the exit code is all that is left to say it.
  }
  return exitProcess(1);
}

export async function loadConfigOrDie(): Promise<Config> {
  guardStdio();
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) return die(err.message);
    throw err;
  }
}

/**
 * Start-up faults the operator fixes rather than reads a stack trace for (a configuration only
 * the app can judge, a PGlite folder another process holds): one line and exit 1.
 */
export async function orDie<T>(starting: Promise<T>): Promise<T> {
  try {
    return await starting;
  } catch (err) {
    if (err instanceof ConfigError) return die(err.message);
    throw err;
  }
}

/** A database URL fit for a log line: the password and credential-like parameters masked. */
export function redactUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return "(an unparseable URL)";
  }
  // without a host, credentials would sit in the path, which nothing below masks
  if (!u.host) return `(a ${u.protocol} URL without //host)`;
  if (u.password) u.password = "***";
  for (const key of [...u.searchParams.keys()]) {
    if (/pass|secret|key|token/i.test(key)) u.searchParams.set(key, "***");
  }
  return u.toString().replaceAll("%2A%2A%2A", "***");
}

/**
 * With Postgres configured, connects once before anything else does, so an unreachable or
 * misconfigured server is reported by the driver's own reason (e.g. `connect ECONNREFUSED`)
 * on one line, instead of the schema engine's WebAssembly stack trace. Exits 1 on failure.
 */
export async function ensureDatabaseReachable(config: Pick<Config, "databaseUrl">): Promise<void> {
  const problem = await unreachableDatabase(config.databaseUrl, { writes: true });
  if (problem) return die(problem);
}

/**
 * Binds the configured port once and lets it go, before the database is opened: a port in use
 * is said at once, not after a first start's migrations (12 s on a 2-core machine). The real
 * listen can still lose a race for the port; main.ts reports that with the same line.
 */
export async function ensurePortFree(config: Pick<Config, "host" | "port">): Promise<void> {
  if (config.port === 0) return;
  const probe = createServer();
  const fault = await new Promise<NodeJS.ErrnoException | null>((resolve) => {
    probe.once("error", resolve);
    probe.listen({ port: config.port, host: config.host, exclusive: true }, () => resolve(null));
  });
  await new Promise<void>((resolve) => (fault ? resolve() : probe.close(() => resolve())));
  if (fault) return die(listenFault(config, fault));
}

/** A listen that failed, on one line. */
export function listenFault(config: Pick<Config, "host" | "port">, err: NodeJS.ErrnoException): string {
  const why = err.code === "EADDRINUSE" ? "the port is in use (set PORT to another)" : err.code === "EACCES" ? "permission denied" : err.message;
  return `cannot listen on ${config.host}:${config.port}: ${why}`;
}

/**
 * Why the Postgres server at `url` cannot be used, on one line with the password masked; null
 * when it answers (or for embedded PGlite, which has nothing to reach). The CLI reports it as
 * its own failure. `writes`: a read-only database is refused too (the start of the server, the
 * worker and the migrations write; the CLI's lists still read from a standby).
 */
export async function unreachableDatabase(url: string | undefined, opts: { writes?: boolean } = {}): Promise<string | null> {
  if (!url) return null;
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  client.on("error", () => {}); // the failure is reported through connect()/query()
  let found: DatabaseTraits;
  try {
    await client.connect();
    found = (await client.query<DatabaseTraits>(TRAITS)).rows[0];
  } catch (err) {
    await client.end().catch(() => {});
    return databaseFault("reach", url, err);
  }
  await client.end().catch(() => {});
  const unfit = unfitDatabase(found, opts.writes ?? false);
  return unfit && oneLine(`cannot use the database at ${redactUrl(url)}: ${unfit}`);
}

type DatabaseTraits = { encoding: string; read_only: boolean };

/** What a database must be that no connection setting of linkgate's can make it (docs/operations.md, "Database connections"). */
const TRAITS = `SELECT current_setting('server_encoding') AS encoding, current_setting('transaction_read_only')::boolean AS read_only`;

/**
 * Names sit in the database as the people typed them, in any script. A LATIN1 database failed the
 * first start halfway through its migrations (a migration's comment has a character LATIN1
 * lacks), leaving a failed migration to recover by hand; an SQL_ASCII one stores bytes
 * unchecked, each counted as a character. A read-only one (a hot standby, or
 * default_transaction_read_only on for its database or role) crashed the start at its first
 * write, with a stack trace.
 */
function unfitDatabase({ encoding, read_only }: DatabaseTraits, writes: boolean): string | null {
  if (encoding !== "UTF8") return `it is encoded ${encoding}; linkgate needs a UTF8 database (CREATE DATABASE … ENCODING 'UTF8' TEMPLATE template0)`;
  if (read_only && writes) return "it is read-only (a hot standby, or default_transaction_read_only on for its database or role); linkgate writes to it";
  return null;
}

/** A failure to `what` the database at `url` (its password masked), on one line. */
export function databaseFault(what: string, url: string, err: unknown): string {
  return oneLine(`cannot ${what} the database at ${redactUrl(url)}: ${reason(err)}`);
}

/** The driver's reason, without the password even if a message ever quoted the URL. */
function reason(err: unknown): string {
  const e = err as { message?: string; code?: string; errors?: unknown[] };
  // Connecting to a name with several addresses fails with an AggregateError and no message.
  const nested = Array.isArray(e?.errors) ? [...new Set(e.errors.map((x) => (x as Error)?.message).filter(Boolean))] : [];
  return oneLine(e?.message || nested.join("; ") || e?.code || String(err));
}

const oneLine = (s: string) => s.replace(/\s+/g, " ").trim();

/**
 * Runs `fn` with SIGTERM and SIGINT held back, then lets a signal that arrived meanwhile take its
 * course (the process's own handlers, or Node's default: the process ends). For work that a kill
 * in its middle leaves for a person to repair: Prisma's engine records a migration as failed when
 * its process dies before the migration is finished, and every later start then refuses until
 * someone recovers it by hand (docs/operations.md, "A migration that failed"). A supervisor's
 * SIGTERM during a start (a roll-out called off, a Ctrl-C of `npm run db:migrate`) did exactly
 * that. SIGKILL cannot be held.
 */
export async function withSignalsHeld<T>(what: string, fn: () => Promise<T>): Promise<T> {
  let held: NodeJS.Signals | undefined;
  const hold = (signal: NodeJS.Signals) => {
    if (held) return;
    held = signal;
    try {
      process.stderr.write(`linkgate: ${signal} received while ${what}; stopping once that is done (a kill -9 now would leave it half done)\n`);
    } catch {
      // stderr is gone: the signal is still held
    }
  };
  const signals = ["SIGTERM", "SIGINT"] as const;
  for (const signal of signals) process.on(signal, hold);
  try {
    return await fn();
  } finally {
    for (const signal of signals) process.off(signal, hold);
    if (held) process.kill(process.pid, held);
  }
}

export type Stoppable = {
  /** Stops gracefully: stop taking work, finish what is running, close. */
  drain(): Promise<void>;
  /**
   * Called when the deadline passes while drain() is still running: give up on what is in
   * flight and hand it back (released delivery leases), quickly.
   */
  abandon(): Promise<void>;
};

/**
 * SIGTERM and SIGINT call drain(); if it has not finished `timeoutMs` later, abandon() runs
 * (bounded by RELEASE_GRACE_MS) and the process exits 1. A clean drain exits 0. Further
 * signals while stopping are ignored: a supervisor's repeated SIGTERM must not cut the release
 * short (SIGKILL still does).
 */
export function stopOnSignals(logger: Logger, timeoutMs: number, target: Stoppable): void {
  let phase: "running" | "draining" | "abandoning" = "running";

  async function drain(signal: string): Promise<void> {
    phase = "draining";
    logger.info({ signal, deadlineMs: timeoutMs }, "draining");
    const deadline = setTimeout(() => void abandon(`the shutdown deadline (${timeoutMs} ms) passed`), timeoutMs);
    try {
      await target.drain();
    } catch (err) {
      clearTimeout(deadline);
      return abandon(`draining failed: ${reason(err)}`);
    }
    if (phase !== "draining") return; // the deadline won
    clearTimeout(deadline);
    logger.info("stopped");
    await exitProcess(0);
  }

  async function abandon(why: string): Promise<void> {
    if (phase === "abandoning") return;
    phase = "abandoning";
    logger.error({ reason: why }, "stopping now: in-flight deliveries are released for other workers");
    const grace = setTimeout(() => {
      logger.error({ graceMs: RELEASE_GRACE_MS }, "releasing did not finish; leases will run out instead");
      void exitProcess(1);
    }, RELEASE_GRACE_MS);
    try {
      await target.abandon();
    } catch (err) {
      logger.error({ err: reason(err) }, "releasing in-flight work failed; leases will run out instead");
    }
    clearTimeout(grace);
    await exitProcess(1);
  }

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      if (phase === "running") void drain(signal);
    });
  }
}
