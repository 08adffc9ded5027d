// One issuer for every gateway. Tokens name the URL that issued them (`iss`) and every process
// verifies that name, so gateways behind one load balancer must all be told the public URL in
// LINKGATE_ISSUER. Left unset, a process names itself http://HOST:PORT, which is right for one
// process and wrong for two: each would refuse the other's tokens, a failure that shows up only
// when a request lands on the other process. So it is refused at start (docs/configuration.md),
// and so is a gateway whose issuer differs from the running ones' (25th review: one started
// without the variable beside gateways that had it, and refused everybody's tokens).
import pg from "pg";

/** The advisory lock a gateway without LINKGATE_ISSUER holds for as long as it runs ("lgis"). */
const DEFAULT_ISSUER_LOCK = 0x6c676973;
/**
 * Every gateway holds a shared advisory lock (this class, its issuer's hash) for as long as it
 * runs, so a gateway can see in pg_locks whether one with another issuer is running ("lgi2").
 */
const ISSUER_CLASS = 0x6c676932;

export class IssuerNotShared extends Error {}

export type IssuerClaim = { release(): Promise<void> };

/**
 * Another running gateway's issuer, if any differs from $2: read from the lock connection's
 * application_name (cut at 63 characters by Postgres), which is only for the message; the
 * decision is the hash in the lock. Two different issuers sharing a 32-bit hash are not told apart.
 */
const OTHER_ISSUER = `
  SELECT coalesce(nullif(substr(a.application_name, length('linkgate issuer ') + 1), ''), 'another issuer') AS issuer
  FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
  WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.classid = $1::int8::oid AND l.objid <> (hashtext($2)::int8 & 4294967295)::oid
  LIMIT 1`;

/**
 * On a shared Postgres database, a gateway takes, on a connection of its own that it keeps until
 * it exits, a shared lock naming its issuer, and refuses to start if a running gateway names
 * another. One that names itself (no LINKGATE_ISSUER, `named` false) also takes an exclusive
 * lock: two such gateways could name the same http://HOST:PORT and still be two processes. Two
 * gateways with different issuers starting at the same moment may both refuse, never both run.
 * (PGlite belongs to one process: nothing to share.)
 */
export async function claimIssuer(databaseUrl: string, issuer: string, named: boolean, opts: { connectTimeoutMs?: number } = {}): Promise<IssuerClaim> {
  const connect = { databaseUrl, connectTimeoutMs: opts.connectTimeoutMs ?? CONNECT_TIMEOUT_MS };
  let held = await lockIssuer(connect, issuer, named, true);
  let released = false;
  let timer: NodeJS.Timeout | undefined;
  // The locks end with their connection. One the server ended (a restart, a failover,
  // pg_terminate_backend) is taken again on a new connection: lost for good, a gateway with
  // another issuer started beside this one unrefused (31st review).
  const watch = (client: pg.Client) =>
    client.once("end", () => {
      if (!released) again();
    });
  const again = () => {
    timer = setTimeout(async () => {
      if (released) return;
      try {
        held = await lockIssuer(connect, issuer, named, false);
        if (released) await held.end().catch(() => {});
        else watch(held);
      } catch {
        again();
      }
    }, RECLAIM_MS);
    timer.unref();
  };
  watch(held);
  return {
    release: async () => {
      released = true;
      clearTimeout(timer);
      await held.end().catch(() => {});
    },
  };
}

/** How often a lost issuer lock is asked for again. */
const RECLAIM_MS = 1_000;
/**
 * How long connecting for the lock may take. Without a bound, a reconnection that met a server
 * accepting connections and never answering (a partition, a proxy whose database is down) waited
 * for ever, and no other was tried once the database was back: the gateway ran on without its
 * issuer's lock, and a gateway with another issuer started beside it unrefused (34th review).
 */
const CONNECT_TIMEOUT_MS = 5_000;

/**
 * A connection holding the issuer's locks. `refuse`: at start, when another gateway's issuer
 * (or, unnamed, another unnamed gateway) refuses this one; taken again later, the locks are
 * simply held again (this gateway already serves: a conflict then was refused at the other's start).
 */
async function lockIssuer(
  { databaseUrl, connectTimeoutMs }: { databaseUrl: string; connectTimeoutMs: number },
  issuer: string,
  named: boolean,
  refuse: boolean,
): Promise<pg.Client> {
  // keepAlive, as the pool's and the LISTEN connections: a peer gone silent ends the connection,
  // and its "end" takes the locks again
  const client = new pg.Client({
    connectionString: databaseUrl,
    application_name: `linkgate issuer ${issuer}`.slice(0, 63),
    connectionTimeoutMillis: connectTimeoutMs,
    keepAlive: true,
  });
  // a broken connection has nothing left to release; its "end" takes the locks again
  client.on("error", () => {});
  try {
    await client.connect();
    if (!named) {
      const { rows } = await client.query<{ held: boolean }>("SELECT pg_try_advisory_lock($1) AS held", [DEFAULT_ISSUER_LOCK]);
      if (!rows[0]?.held && refuse) {
        throw new IssuerNotShared(
          `another linkgate gateway already serves this database without LINKGATE_ISSUER, so this one (${issuer}) would reject its tokens and it would reject ours; ` +
            "set LINKGATE_ISSUER to the public URL clients use, the same on every gateway",
        );
      }
    }
    await client.query("SELECT pg_advisory_lock_shared($1, hashtext($2))", [ISSUER_CLASS, issuer]);
    const { rows } = refuse ? await client.query<{ issuer: string }>(OTHER_ISSUER, [ISSUER_CLASS, issuer]) : { rows: [] };
    if (rows[0]) {
      throw new IssuerNotShared(
        `a linkgate gateway serving this database names its tokens' issuer ${rows[0].issuer}, and this one would name them ${issuer}${named ? "" : " (LINKGATE_ISSUER is unset)"}: ` +
          "each would reject the other's tokens; set LINKGATE_ISSUER to the public URL clients use, the same on every gateway",
      );
    }
  } catch (err) {
    await client.end().catch(() => {});
    throw err;
  }
  return client;
}
