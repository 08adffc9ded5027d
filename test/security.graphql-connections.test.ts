// One GraphQL request may hold at most 4 of the pool's connections at once (docs/operations.md,
// "Database connections"). Sibling fields resolve at the same time: a document with a dozen
// lists ran a dozen statements at once and held every connection of the pool (ten), so every
// other caller's statements queued behind it. Postgres only: PGlite has one connection.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONNECTIONS_PER_REQUEST, shareConnections, withConnectionShare } from "../src/db/connection-share.ts";
import { CreateWebhookDocument } from "./generated/operations.ts";
import { serverUrl } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

const onPostgres = serverUrl ? describe : describe.skip;

/** The most connections the pool had checked out at once while `fn` ran. */
async function peakDuring(pool: pg.Pool, fn: () => Promise<unknown>): Promise<number> {
  let out = 0;
  let peak = 0;
  const acquired = () => (peak = Math.max(peak, ++out));
  const released = () => out--;
  pool.on("acquire", acquired);
  pool.on("release", released);
  try {
    await fn();
  } finally {
    pool.off("acquire", acquired);
    pool.off("release", released);
  }
  return peak;
}

/**
 * pg's Pool.end() resolves once it has asked its connections to close, not once they have: the
 * database's DROP … WITH (FORCE) right after terminated one still closing, and the server's
 * FATAL 57P01 reached the pool as an error with no listener, an uncaught exception that failed a
 * whole CI run. So wait until every connection is gone ('remove' follows each one's close).
 */
async function endPool(pool: pg.Pool): Promise<void> {
  let open = pool.totalCount;
  const closed = new Promise<void>((resolve) => {
    if (open === 0) resolve();
    pool.on("remove", () => --open === 0 && resolve());
  });
  await pool.end();
  await closed;
}

/** Ten idle connections, so that a checkout never waits for a new one to open. */
const warm = (pool: pg.Pool) => Promise.all(Array.from({ length: 10 }, () => pool.query("SELECT pg_sleep(0.02)")));

onPostgres("a share of the pool", () => {
  let h: Harness;
  let pool: pg.Pool;
  beforeAll(async () => {
    // nothing in the background checks a connection out while the tests count them
    h = await startHarness("postgres", { env: { LINKGATE_RETENTION_SWEEP_SECONDS: "0" } });
    await h.app.deps.notices.stop();
    pool = new pg.Pool({ connectionString: h.db.url, max: 10 });
    shareConnections(pool);
  });
  afterAll(async () => {
    if (pool) await endPool(pool);
    await h?.close();
  });

  it(`runs a share's statements ${CONNECTIONS_PER_REQUEST} at a time, and others' as before`, async () => {
    expect(CONNECTIONS_PER_REQUEST).toBe(4);
    await warm(pool);
    const twelve = () => Promise.all(Array.from({ length: 12 }, (_, i) => pool.query("SELECT pg_sleep(0.02), $1::int AS i", [i])));
    expect(await peakDuring(pool, () => withConnectionShare(twelve))).toBe(4);
    expect(await peakDuring(pool, twelve)).toBe(10);
  });

  it("holds a place for a transaction until it ends, and never waits on itself", async () => {
    await warm(pool);
    const rows = await withConnectionShare(async () => {
      const tx = await pool.connect();
      try {
        await tx.query("BEGIN");
        // three places left for the rest of the share while the transaction runs
        const others = Promise.all(Array.from({ length: 6 }, () => pool.query("SELECT pg_sleep(0.01)")));
        const inside = await tx.query("SELECT 1 AS one");
        await tx.query("COMMIT");
        await others;
        return inside.rows;
      } finally {
        tx.release();
      }
    }, 4);
    expect(rows).toEqual([{ one: 1 }]);
  });

  it("gives each GraphQL request its own share, and answers every sibling list", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      const r = await h.op(CreateWebhookDocument, { input: { url: `https://127.0.0.1:9/hook-${i}`, events: ["user.created"] } });
      if (r.createWebhook.__typename !== "CreateWebhookPayload") throw new Error(r.createWebhook.__typename);
      ids.push(r.createWebhook.webhook.id);
    }
    const appPool = (h.db.driver as { pool: pg.Pool }).pool;
    await warm(appPool);
    const doc = `{ ${ids.map((id, i) => `w${i}: webhook(id: "${id}") { id deliveries(first: 5) { edges { node { id } } } }`).join(" ")} }`;
    let answer: any;
    const peak = await peakDuring(appPool, async () => (answer = await h.gql(doc)));
    expect(answer.body.errors).toBeUndefined();
    expect(ids.map((id, i) => answer.body.data[`w${i}`].id)).toEqual(ids);
    expect(peak).toBeLessThanOrEqual(CONNECTIONS_PER_REQUEST);
  });
});
