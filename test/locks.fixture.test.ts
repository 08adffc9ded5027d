// The race tests' lock holder (test/support/locks.ts) must see every statement that comes to
// wait for its lock, also one on a connection opened after it first looked: the app's pool opens
// one whenever none is idle, and such a wait went unseen (a flake of
// security.provider-removal-races.test.ts under the whole suite's load).
import pg from "pg";
import { describe, expect, it } from "vitest";
import { openTestDatabase, serverUrl } from "./support/db.ts";
import { lockWaiters, waitingForLock } from "./support/locks.ts";

const onPostgres = serverUrl ? describe : describe.skip;

onPostgres("the lock holder's view of who waits", () => {
  it("counts a wait on a connection opened after the holder's first look, in the same transaction", async () => {
    const db = await openTestDatabase("postgres");
    const connect = async () => {
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      return c;
    };
    const holder = await connect();
    let late: pg.Client | undefined;
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT pg_advisory_xact_lock(4242)");
      expect(await lockWaiters(holder)).toBe(0);
      late = await connect();
      const waiting = late.query("SELECT pg_advisory_xact_lock(4242)");
      waiting.catch(() => {}); // ended by the cleanup if the holder never saw it
      await waitingForLock(holder, 1);
      expect(await lockWaiters(holder)).toBe(1);
      await holder.query("COMMIT");
      await waiting;
      expect(await lockWaiters(holder)).toBe(0);
    } finally {
      await holder.query("ROLLBACK").catch(() => {});
      await late?.end();
      await holder.end();
      await db.close();
    }
  });
});
