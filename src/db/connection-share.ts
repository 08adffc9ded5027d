// How many pooled connections one request may hold at once (docs/operations.md, "Database
// connections"). A GraphQL request resolves sibling fields at the same time: one document with
// twenty lists ran twenty statements at once and held every connection of the pool (ten), so
// everybody else's statements waited behind it. Within a share (an AsyncLocalStorage scope the
// GraphQL route opens per request) a checkout waits for one of the share's places first; a
// transaction holds its place until it ends, and its statements run on its own connection, so
// a share never waits on itself. Outside any share (the delivery worker, the notice sender,
// REST, whose handlers run one statement at a time) nothing changes.
import { AsyncLocalStorage } from "node:async_hooks";
import type pg from "pg";

/** Places of a share: a request's statements run at most this many at a time. */
export const CONNECTIONS_PER_REQUEST = 4;

class Share {
  private waiting: Array<() => void> = [];
  constructor(private free: number) {}

  take(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  give(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

const current = new AsyncLocalStorage<Share>();

/** Runs `fn` with its own share of the pool: its checkouts wait for one of `places`. */
export function withConnectionShare<T>(fn: () => T, places = CONNECTIONS_PER_REQUEST): T {
  return current.run(new Share(places), fn);
}

type Checkout = (err: Error | undefined, client?: pg.PoolClient, release?: (err?: Error) => void) => void;

/**
 * Makes `pool.connect` wait for a place of the caller's share, and give it back when the client
 * is released. pg-pool's own query() checks out through connect() with a callback, Prisma's
 * adapter with a promise (statements and transactions alike), so both forms are kept.
 */
export function shareConnections(pool: pg.Pool): void {
  const connect = pool.connect.bind(pool) as () => Promise<pg.PoolClient>;
  const shared = async (share: Share): Promise<pg.PoolClient> => {
    await share.take();
    let client: pg.PoolClient;
    try {
      client = await connect();
    } catch (err) {
      share.give();
      throw err;
    }
    const release = client.release;
    let given = false;
    client.release = (err?: Error | boolean) => {
      if (!given) {
        given = true;
        share.give();
      }
      return release.call(client, err);
    };
    return client;
  };
  pool.connect = function (this: pg.Pool, cb?: Checkout) {
    const share = current.getStore();
    if (!share) return (connect as (cb?: Checkout) => Promise<pg.PoolClient> | void).call(pool, cb);
    const checkout = shared(share);
    if (!cb) return checkout;
    checkout.then(
      (client) => cb(undefined, client, client.release),
      (err: Error) => cb(err),
    );
  } as pg.Pool["connect"];
}
