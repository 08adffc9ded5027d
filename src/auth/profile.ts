// The signed-in user's own account: profile changes and deletion, each with its event.
import type { Deps, UserActor } from "../deps.ts";
import { transaction } from "../db/transaction.ts";
import { enqueue } from "../webhooks/outbox.ts";
import { AccountMerged, InvalidRequest, Unauthenticated } from "../errors.ts";
import { lockAccounts } from "../db/locks.ts";
import { loadAccount, userEventData, userObject } from "./accounts.ts";
import { requireRecentAuth } from "./recent-auth.ts";

export async function updateProfile(deps: Deps, actor: UserActor, input: { name: unknown }) {
  if (typeof input.name !== "string" || input.name.length > 200) throw new InvalidRequest("name must be a string of at most 200 characters");
  const name = input.name.trim() || null;
  // the name reaches every app (ID tokens, userinfo) and webhook: a stale, stolen token must not set it
  await requireRecentAuth(deps, actor);
  return transaction(deps.prisma, async (tx) => {
    const { projectId, user } = actor;
    await tx.account.update({ where: { id: user.accountId, projectId }, data: { name } });
    await enqueue(tx, { projectId, eventType: "user.updated", data: await userEventData(tx, projectId, user.accountId) });
    return (await loadAccount(tx, projectId, user.accountId))!;
  });
}

/**
 * Deletes the signed-in account with its identifiers and sessions. A merged account must be
 * unmerged first: deleting a primary would silently strand or take its secondary with it.
 */
export async function deleteAccount(deps: Deps, actor: UserActor) {
  await requireRecentAuth(deps, actor);
  await transaction(deps.prisma, async (tx) => {
    const { projectId, user } = actor;
    await lockAccounts(tx, projectId, [user.accountId]); // a merge of this account waits, or wins first
    const account = await loadAccount(tx, projectId, user.accountId);
    if (!account) throw new Unauthenticated("this account no longer exists");
    if (account.mergedWithId) throw new AccountMerged();
    await tx.account.delete({ where: { id: account.id } });
    await enqueue(tx, { projectId, eventType: "user.deleted", data: { user: userObject(account, "deleted") } });
  });
  return { deleted: true };
}
