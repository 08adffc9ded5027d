// One answer to "is this error the database being unreachable?", for every layer that has to
// tell an outage (503, retry later) from a bug (500). The same failure arrives in many
// wrappings: a socket error from pg, a plain "Connection terminated" Error, a Postgres
// SQLSTATE, a Prisma P1xxx error carrying the driver adapter's error, a GraphQLError around
// any of these. All of them are unwrapped here, once.

/** Socket errors: the server is not there, or the connection to it broke. */
const SOCKET_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"]);

/**
 * Postgres SQLSTATEs of a server that cannot serve now: class 08 (connection exception),
 * 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now (starting up,
 * recovering), 53300 too many connections; and 25006, a write refused by a read-only server (a
 * standby the URL reached after a failover), 55P03 and 57014, a lock wait or a statement cut
 * off by a timeout its operator set on the database or role: each was a 500 (a bug, to the
 * client and the log) where the request is fine and the database is not, now.
 */
const SQLSTATES = /^(08[0-9A-Z]{3}|57P0[123]|53300|25006|55P03|57014)$/;

/**
 * Prisma: P1001 cannot reach the server, P1002 it timed out, P1008 operation timed out,
 * P1017 the server closed the connection, P2024 no pool connection in time.
 */
const PRISMA_CODES = new Set(["P1001", "P1002", "P1008", "P1017", "P2024"]);

/** What @prisma/adapter-pg turns socket errors into. */
const ADAPTER_KINDS = new Set(["DatabaseNotReachable", "ConnectionClosed", "SocketTimeout", "TooManyConnections"]);

/**
 * 55000 (object not in prerequisite state) is many things; with this message it is a database
 * its operator closed to connections (ALTER DATABASE … ALLOW_CONNECTIONS false, for maintenance):
 * a 500 for every request before (31st review), where the server being away is a 503.
 */
const CLOSED_TO_CONNECTIONS = /is not currently accepting connections/;

/** pg's own errors for a broken or unobtainable connection carry no code, only these messages. */
const PG_MESSAGES = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection ended unexpectedly)/;

type Wrapped = {
  code?: unknown;
  errorCode?: unknown;
  kind?: unknown;
  originalCode?: unknown;
  message?: unknown;
  cause?: unknown;
  originalError?: unknown;
  errors?: unknown;
  meta?: { driverAdapterError?: unknown };
};

/** Whether an error, however wrapped, means the database cannot serve the request right now (a 503, retry later). */
export function isConnectionFailure(err: unknown): boolean {
  const seen = new Set<unknown>();
  const queue: unknown[] = [err];
  while (queue.length) {
    const e = queue.shift();
    if (e === null || typeof e !== "object" || seen.has(e)) continue;
    seen.add(e);
    if (isConnectionFailureItself(e as Wrapped)) return true;
    queue.push(...wrapped(e as Wrapped));
  }
  return false;
}

function isConnectionFailureItself(e: Wrapped): boolean {
  const code = typeof e.code === "string" ? e.code : undefined;
  if (code && (SOCKET_CODES.has(code) || SQLSTATES.test(code) || PRISMA_CODES.has(code))) return true;
  if (code === "55000" && typeof e.message === "string" && CLOSED_TO_CONNECTIONS.test(e.message)) return true;
  if (typeof e.errorCode === "string" && PRISMA_CODES.has(e.errorCode)) return true;
  if (typeof e.kind === "string" && ADAPTER_KINDS.has(e.kind)) return true;
  if (typeof e.originalCode === "string" && SQLSTATES.test(e.originalCode)) return true;
  return typeof e.message === "string" && PG_MESSAGES.test(e.message);
}

// Where the wrappers keep what they wrap: Error.cause, GraphQLError.originalError,
// AggregateError.errors (pg tries every address of a host), Prisma's meta.driverAdapterError.
function wrapped(e: Wrapped): unknown[] {
  const inner = [e.cause, e.originalError, e.meta?.driverAdapterError];
  if (Array.isArray(e.errors)) inner.push(...e.errors);
  return inner;
}
