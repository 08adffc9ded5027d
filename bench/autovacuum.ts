// What autovacuum does for a Postgres database in production, for benchmarks on a server that
// runs without it (CI's settings: autovacuum = off). A table analyzed as it grows also makes every
// connection plan its prepared statements on it again (src/db/fast.ts names them); without that, a
// statement keeps the plan it got while its table was nearly empty. Measured in the link benchmark
// without it: the notice sender's claim and "sent" updates read all of `notices` (sequential scans
// of 30 ms and more once it held tens of thousands of rows, auto_explain), and the half-rate p99
// went to 207 ms. Analyzing the whole database every 10 s instead made every connection plan
// everything again each time: closed-loop p99 556 ms. So this does what autovacuum does, no more.
import pg from "pg";

/** autovacuum_naptime's default: how often autovacuum looks at a database. */
const NAPTIME_MS = 60_000;
/** autovacuum_analyze_threshold and autovacuum_analyze_scale_factor's defaults. */
const ANALYZE_THRESHOLD = 50;
const ANALYZE_SCALE_FACTOR = 0.1;

/**
 * Every NAPTIME_MS, ANALYZEs each table of the database at `url` changed by more than
 * ANALYZE_THRESHOLD + ANALYZE_SCALE_FACTOR × its rows since it was last analyzed (autovacuum's
 * rule), on a connection of its own, until stopped.
 */
export async function analyzeLikeAutovacuum(url: string): Promise<{ stop(): Promise<void> }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const round = async () => {
    const { rows } = await client.query<{ name: string }>(
      `SELECT format('%I.%I', s.schemaname, s.relname) AS name
       FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
       WHERE s.n_mod_since_analyze > $1 + $2 * greatest(c.reltuples, 0)`,
      [ANALYZE_THRESHOLD, ANALYZE_SCALE_FACTOR],
    );
    for (const { name } of rows) await client.query(`ANALYZE ${name}`);
  };
  let running: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    running = running.then(round).catch(() => {});
  }, NAPTIME_MS);
  return {
    async stop() {
      clearInterval(timer);
      await running;
      await client.end();
    },
  };
}
