// Row locks. Account locks are shared by sign-in and linking: both decide from an account's
// merge state, and an account's identifiers and merge partner only change while its row is locked.
import type { Tx } from "./client.ts";

export type LockedAccount = { id: string; project_id: string; merged_with_id: string | null; merge_role: "primary" | "secondary" | null };

/**
 * Row-locks a project's accounts in id order, so two transactions locking the same pair cannot
 * deadlock. The project is in the WHERE: another project's account is simply not returned (nor
 * locked), and the caller answers it as a missing one.
 */
export async function lockAccounts(tx: Tx, projectId: string, ids: string[]): Promise<LockedAccount[]> {
  return tx.$queryRaw<LockedAccount[]>`
    SELECT id, project_id, merged_with_id, merge_role::text AS merge_role
    FROM accounts WHERE project_id = ${projectId} AND id = ANY (${ids}::text[]) ORDER BY id FOR UPDATE`;
}

/**
 * Row-locks an account and its merge partner (as it was read), in id order, in one statement:
 * what lockAccounts would lock for the pair, without a round trip to read the partner first.
 * The partner read in the sub-select is not locked by it; the caller checks the account's
 * partner under the lock against the rows returned.
 */
export async function lockAccountAndPartner(tx: Tx, projectId: string, id: string): Promise<LockedAccount[]> {
  return tx.$queryRaw<LockedAccount[]>`
    SELECT id, project_id, merged_with_id, merge_role::text AS merge_role
    FROM accounts
    WHERE project_id = ${projectId}
      AND id = ANY (ARRAY[${id}, (SELECT p.merged_with_id FROM accounts p WHERE p.id = ${id} AND p.project_id = ${projectId})])
    ORDER BY id FOR UPDATE`;
}

/**
 * Row-locks a project: what a project may hold only so many of (webhooks, src/webhooks/
 * service.ts; identity providers) is counted and added under it, so two adds at once cannot both
 * take the last place. NO KEY UPDATE, not UPDATE: every new account, identifier and key checks its
 * foreign key to the project with a key-share lock, which FOR UPDATE conflicts with, so each
 * sign-in of a new user waited for a webhook's add to commit. False when the project is gone (deleted
 * after the caller's key was checked): the caller answers Unauthenticated, as its key would be now.
 */
export async function lockProject(tx: Tx, projectId: string): Promise<boolean> {
  const found = await tx.$queryRaw<unknown[]>`SELECT 1 FROM projects WHERE id = ${projectId} FOR NO KEY UPDATE`;
  return found.length > 0;
}

/** The first-run turn's advisory lock ("lgfr"). */
const FIRST_RUN_LOCK = 0x6c676672;

/**
 * What a first start creates (the signing key, the bootstrap project and its keys) is checked
 * and created in this turn, which processes starting at once take one after another: each found
 * nothing and created its own, so gateways signed with keys the others did not publish (their
 * tokens were 401 elsewhere until every gateway restarted) and bootstrap keys failed their
 * uniqueness with a stack trace (31st review). Held until the transaction ends.
 */
export async function takeFirstRunTurn(tx: Tx): Promise<void> {
  await tx.$queryRaw`SELECT 1 AS taken FROM (SELECT pg_advisory_xact_lock(${FIRST_RUN_LOCK}::bigint)) AS turn`;
}
