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

/** Until `n` statements of other connections to the database wait for a lock (bounded: 10 s). */
export async function waitingForLock(client: pg.Client, n = 1): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    const { rows } = await client.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
    );
    if (rows[0].n >= n) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`${n} statements never came to wait for the lock`);
}
