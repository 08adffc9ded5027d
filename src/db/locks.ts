// Account row locks, shared by sign-in and linking: both decide from an account's merge state,
// and an account's identifiers and merge partner only change while its row is locked.
import type { Tx } from "./client.ts";
import { Prisma } from "../generated/prisma/client.ts";

export type LockedAccount = { id: string; project_id: string; merged_with_id: string | null; merge_role: "primary" | "secondary" | null };

/**
 * Row-locks accounts in id order, so two transactions locking the same pair cannot deadlock.
 * With `projectId` the project is in the WHERE: another project's account is simply not
 * returned (nor locked), and the caller answers it as a missing one. Linking passes it; the
 * sign-in and profile callers (src/auth) lock ids they read within their project already.
 */
export async function lockAccounts(tx: Tx, ids: string[], projectId?: string): Promise<LockedAccount[]> {
  const inProject = projectId === undefined ? Prisma.empty : Prisma.sql`AND project_id = ${projectId}`;
  return tx.$queryRaw<LockedAccount[]>`
    SELECT id, project_id, merged_with_id, merge_role::text AS merge_role
    FROM accounts WHERE id = ANY (${ids}::text[]) ${inProject} ORDER BY id FOR UPDATE`;
}
