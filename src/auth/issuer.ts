// One issuer for every gateway. Tokens name the URL that issued them (`iss`) and every process
// verifies that name, so gateways behind one load balancer must all be told the public URL in
// LINKGATE_ISSUER. Left unset, a process names itself http://HOST:PORT, which is right for one
// process and wrong for two: each would refuse the other's tokens, a failure that shows up only
// when a request lands on the other process. So it is refused at start (docs/configuration.md).
import pg from "pg";

/** The advisory lock a gateway without LINKGATE_ISSUER holds for as long as it runs ("lgis"). */
const DEFAULT_ISSUER_LOCK = 0x6c676973;

export class IssuerNotShared extends Error {}

export type IssuerClaim = { release(): Promise<void> };

/**
 * On a shared Postgres database, a gateway that names itself takes a session-level advisory
 * lock on a connection of its own and keeps it until it exits; a second such gateway cannot
 * take it and must not start. With LINKGATE_ISSUER set, every process names the same issuer and
 * nothing is taken. (PGlite belongs to one process: nothing to share.)
 */
export async function claimDefaultIssuer(databaseUrl: string, issuer: string): Promise<IssuerClaim> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: "linkgate issuer" });
  await client.connect();
  // The lock ends with the connection; a broken connection has nothing left to release.
  client.on("error", () => {});
  const { rows } = await client.query<{ held: boolean }>("SELECT pg_try_advisory_lock($1) AS held", [DEFAULT_ISSUER_LOCK]);
  if (!rows[0]?.held) {
    await client.end();
    throw new IssuerNotShared(
      `another linkgate gateway already serves this database without LINKGATE_ISSUER, so this one (${issuer}) would reject its tokens and it would reject ours; ` +
        "set LINKGATE_ISSUER to the public URL clients use, the same on every gateway",
    );
  }
  return { release: () => client.end().catch(() => {}) };
}
