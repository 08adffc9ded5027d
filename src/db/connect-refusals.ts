// A pool whose refused connections read as outages, whatever the server's words.
import pg from "pg";

/** SQLSTATE 08004: the server rejected the establishment of the connection. */
export const CONNECTION_REFUSED = "08004";

const SQLSTATE = /^[0-9A-Z]{5}$/;

type Callback = (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void;

/**
 * Whatever a server answers while a connection is being made refuses that connection: its
 * database closed to connections (55000), dropped or renamed (3D000), the role's password
 * changed (28P01), too many clients (53300). Only the message told 55000's "not accepting
 * connections" from the other 55000s, and it is in the server's language (`lc_messages`, which
 * initdb takes from the machine's locale): a server set up in German answered every request with
 * a 500 while its database was closed for maintenance. Such an error now carries 08004, a
 * connection exception, which src/db/faults.ts reads as the database being away (a 503, retry
 * later) on every path; the server's own code stays in `refusedAs`, its words in the message
 * (docs/operations.md, "Database connections").
 */
export function asRefusal<E>(err: E): E {
  const e = err as { code?: unknown; refusedAs?: unknown } | null;
  if (e && typeof e === "object" && typeof e.code === "string" && SQLSTATE.test(e.code) && !e.code.startsWith("08")) {
    e.refusedAs = e.code;
    e.code = CONNECTION_REFUSED;
  }
  return err;
}

/** pg's Pool, every connection it fails to make passed through asRefusal (queries and checkouts alike). */
export class RefusalAwarePool extends pg.Pool {
  override connect(): Promise<pg.PoolClient>;
  override connect(callback: Callback): void;
  override connect(callback?: Callback): Promise<pg.PoolClient> | void {
    if (!callback) {
      return super.connect().catch((err: unknown) => {
        throw asRefusal(err);
      });
    }
    super.connect((err, client, done) => callback(err && asRefusal(err), client, done));
  }
}
