// Business transactions. A unique-constraint or serialization conflict means another process
// changed the same rows first; re-running the whole function re-reads the state and re-checks
// every rule, so the loser ends with the clean domain error the new state implies.
import pRetry, { AbortError } from "p-retry";
import type { Db, Tx } from "./client.ts";

const RETRYABLE = new Set(["P2002", "P2034", "40001", "40P01", "23505"]);

// Model queries report a conflict as P2002/P2034; raw queries fail with P2010 and carry the
// server's SQLSTATE inside the driver adapter's error. Both are looked at here, once.
function isConflict(err: unknown): boolean {
  const e = err as {
    code?: string;
    cause?: { code?: string; originalCode?: string };
    meta?: { code?: string; driverAdapterError?: { cause?: { originalCode?: string } } };
  };
  const codes = [e?.code, e?.cause?.code, e?.cause?.originalCode, e?.meta?.code, e?.meta?.driverAdapterError?.cause?.originalCode];
  return codes.some((c) => c && RETRYABLE.has(c));
}

/**
 * Thrown inside transaction() when what was read before a lock moved under it: the whole
 * transaction runs again, as after a serialization failure (its SQLSTATE).
 */
export class DecideAgain extends Error {
  readonly code = "40001";
}

export async function transaction<T>(db: Db, fn: (tx: Tx) => Promise<T>): Promise<T> {
  return retryingConflicts(() => db.$transaction(fn, { timeout: 15_000, maxWait: 15_000 }));
}

/** Runs `attempt` (one transaction, or one statement that is its own) again after a conflict, as transaction() does. */
export async function retryingConflicts<T>(attempt: () => Promise<T>): Promise<T> {
  return pRetry(
    async () => {
      try {
        return await attempt();
      } catch (err) {
        if (isConflict(err)) throw err;
        throw new AbortError(err as Error);
      }
    },
    { retries: 4, minTimeout: 5, maxTimeout: 50, randomize: true },
  );
}
