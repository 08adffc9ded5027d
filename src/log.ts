// Structured logs. Secrets never reach a log line: the redaction list covers every header
// and field that carries a credential, in case one is ever logged by mistake.
//
// Logging must never throw, block, or hold the process up at exit. pino's default destination
// (an asynchronous SonicBoom on fd 1) registers an exit hook that calls flushSync(), and
// flushSync() retries every failed write forever: once the reader of stdout has gone (EPIPE),
// `process.exit()` never returned. So lines go through process.stdout instead, which libuv
// writes without blocking; a failed write ends logging on that stream for good.
import { AsyncLocalStorage } from "node:async_hooks";
import pino, { type DestinationStream, type Logger } from "pino";

/** Lines waiting for a slow reader beyond which new lines are dropped rather than kept. */
const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

type Stdio = NodeJS.WriteStream;
const broken = new WeakSet<Stdio>();
const guarded = new WeakSet<Stdio>();

/**
 * After this, a write error on stdout or stderr (EPIPE when the reader has gone, EIO, ENOSPC…)
 * silently stops output on that stream instead of crashing the process with an unhandled
 * 'error' event. console.log and pino both go through here. Idempotent.
 */
export function guardStdio(): void {
  for (const stream of [process.stdout, process.stderr]) {
    if (guarded.has(stream)) continue;
    guarded.add(stream);
    stream.on("error", () => broken.add(stream));
  }
}

/** A pino destination over a stdio stream that never throws and drops lines it cannot write. */
export function stdioDestination(stream: Stdio = process.stdout): DestinationStream {
  guardStdio();
  return {
    write(line: string) {
      if (broken.has(stream) || stream.destroyed || stream.writableLength > MAX_BUFFERED_BYTES) return;
      try {
        stream.write(line);
      } catch {
        // A synchronous stream (a file) throws its write error here.
        broken.add(stream);
      }
    },
  };
}

/**
 * Resolves once stdout and stderr have handed their pending lines to the OS, or after
 * `timeoutMs` (a reader that stopped reading must not hold up an exit).
 */
export async function flushStdio(timeoutMs = 1_000): Promise<void> {
  const pending = [process.stdout, process.stderr].filter((s) => !broken.has(s) && !s.destroyed && s.writableLength > 0);
  if (pending.length === 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(pending.map((s) => new Promise<void>((resolve) => s.write("", () => resolve())))),
    new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs))),
  ]);
  clearTimeout(timer);
}

/**
 * The request a line is written for. Every line written while a request is served carries its
 * id, whoever writes it: a service, the database layer, graphql-yoga logging an error it masked
 * (its logger is the server's, not the request's), so the id a client was answered with finds
 * every line about it (docs/security.md, "Logs").
 */
const requestScope = new AsyncLocalStorage<{ requestId: string }>();

/** Runs `fn` as the serving of request `requestId`: the lines it writes carry that id. */
export function inRequest<T>(requestId: string, fn: () => Promise<T>): Promise<T> {
  return requestScope.run({ requestId }, fn);
}

/** Fields that carry a credential, by name (docs/security.md, "Logs"). */
const SECRET_FIELDS = ["secret", "otp", "access_token", "id_token", "apiKey"];
/** Headers that carry a credential, as Node and fetch name them (lower case) and as people write them. */
const SECRET_HEADERS = ["authorization", "Authorization", "x-api-key", "X-API-Key", "x-admin-token", "X-Admin-Token"];

/**
 * Where those are redacted: a field of the logged object itself (`log.info({ secret })` puts it
 * at the top of the line) or of an object in it (`{ err }`, `{ input }`), and a header of
 * `headers` or `req.headers` at either place. Only `*.secret` and `req.headers` were listed, and
 * pino's `*.` matches one level down only: `{ secret }`, `{ otp }` and `{ headers }` were
 * written in the clear.
 */
const REDACTED_PATHS = [
  ...SECRET_FIELDS.flatMap((f) => [f, `*.${f}`]),
  ...SECRET_HEADERS.flatMap((h) => [`headers["${h}"]`, `*.headers["${h}"]`]),
];

/**
 * Where a database error holds the values of the statement that failed: Postgres' `detail`
 * ("Key (value)=(ada@example.com) already exists", "Failing row contains (…)", every column of
 * the row, a code's hash included), in pg's and PGlite's errors and, from Prisma, under
 * `meta.driverAdapterError.cause`; and PGlite's `params`, every value the statement was given.
 * An unexpected database error was logged with them all (docs/security.md, "Logs").
 */
const VALUE_FIELDS = new Set(["detail", "params", "queryOptions"]);
/** Postgres' messages that quote the value refused: a value of the wrong type or out of range. */
const QUOTED_VALUES: Array<[RegExp, string]> = [
  [/(invalid input (?:syntax|value) for (?:type|enum) [^:\n]*: )"[^\n]*?"(?=`|\n|$)/g, '$1"[redacted]"'],
  [/(\bvalue )"[^\n]*?"( is out of range)/g, '$1"[redacted]"$2'],
  [/(field value out of range: )"[^\n]*?"(?=`|\n|$)/g, '$1"[redacted]"'],
  [/(time zone )"[^\n]*?"( not recognized)/g, '$1"[redacted]"$2'],
];

/** pino's serializer of `err`, then the values a database error holds taken out (VALUE_FIELDS, QUOTED_VALUES). */
function errWithoutValues(err: unknown): unknown {
  return withoutValues(pino.stdSerializers.err(err as Error), 0, new WeakSet());
}

function withoutValues(value: unknown, depth: number, seen: WeakSet<object>): unknown {
  if (typeof value === "string") return QUOTED_VALUES.reduce((s, [pattern, masked]) => s.replace(pattern, masked), value);
  if (value === null || typeof value !== "object" || value instanceof Date) return value;
  if (ArrayBuffer.isView(value)) return `[${value.byteLength} bytes]`;
  if (seen.has(value) || depth > 8) return "[…]";
  seen.add(value);
  if (Array.isArray(value)) return value.map((v) => withoutValues(v, depth + 1, seen));
  const out: Record<string, unknown> = {};
  // an error below the top (Prisma's meta.driverAdapterError) keeps its message, which is no own enumerable field
  if (value instanceof Error) out.message = withoutValues(value.message, depth + 1, seen);
  for (const [key, v] of Object.entries(value)) if (!VALUE_FIELDS.has(key)) out[key] = withoutValues(v, depth + 1, seen);
  return out;
}

export function createLogger(level = "info", destination: DestinationStream = stdioDestination()): Logger {
  return pino(
    {
      level,
      mixin: () => requestScope.getStore() ?? {},
      redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
      serializers: { err: errWithoutValues },
    },
    destination,
  );
}

export type { Logger };
