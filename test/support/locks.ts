// For the race tests on Postgres: a second connection holds an account's lock, and a test waits
// until the app's statements have come to wait for it before it lets go.
import pg from "pg";
import type { Harness } from "./app.ts";
import { standIn, startedForBlock } from "./hooks.ts";

/** The second connection to `h`'s database, for the calling describe block's tests. */
export function lockHolder(h: Harness): pg.Client {
  return standIn(
    startedForBlock(
      async () => {
        const client = new pg.Client({ connectionString: h.db.url });
        await client.connect();
        return client;
      },
      (client) => client.end(),
    ),
  );
}

/**
 * pg_stat_activity as it is now, read by `client`. The holder reads it inside the transaction
 * that holds the lock, and Postgres takes its sessions (and their state and query) once per
 * transaction, at the first read, and shows the same ones until the transaction ends; only the
 * wait events are read live (PostgreSQL docs, "The Cumulative Statistics System", "Viewing
 * Statistics"). A connection the app's pool opened after that first read was never seen: a
 * statement waiting on it was not counted, and a removal that came to wait on a fresh
 * connection failed security.provider-removal-races.test.ts ("neither answered nor came to
 * wait") once the suite's load made the pool open one. pg_stat_clear_snapshot() drops the
 * transaction's copy, so each read sees every session.
 */
async function activity<Row extends pg.QueryResultRow>(client: pg.Client, sql: string): Promise<Row[]> {
  await client.query("SELECT pg_stat_clear_snapshot()");
  return (await client.query<Row>(sql)).rows;
}

/** How many statements of other connections to the database wait for a lock now. */
export async function lockWaiters(client: pg.Client): Promise<number> {
  const [row] = await activity<{ n: number }>(
    client,
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
  );
  return row.n;
}

/** What the database's other connections are doing now, for a failure's message. */
export async function otherConnections(client: pg.Client): Promise<unknown[]> {
  return activity(
    client,
    "SELECT pid, state, wait_event_type, wait_event, left(query, 160) AS query FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
  );
}

/** Until `n` statements of other connections to the database wait for a lock (bounded: 10 s). */
export async function waitingForLock(client: pg.Client, n = 1): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if ((await lockWaiters(client)) >= n) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`${n} statements never came to wait for the lock; the database's other connections: ${JSON.stringify(await otherConnections(client))}`);
}

/**
 * `request` reads a row, then comes to wait for it while `blocker` changes it with `sql` in a
 * transaction that commits only once the request waits: the request meets, deterministically,
 * the change made between its read and its write (a deletion, another rotation).
 */
export async function committedUnder<T>(blocker: pg.Client, sql: string, params: unknown[], request: () => Promise<T>): Promise<T> {
  await blocker.query("BEGIN");
  try {
    await blocker.query(sql, params);
    const answer = request();
    await waitingForLock(blocker, 1);
    await blocker.query("COMMIT");
    return await answer;
  } finally {
    await blocker.query("ROLLBACK").catch(() => {});
  }
}
