// Support staff acting on an account for its user, with the project's secret key: separating a
// merge. The rules stay in service.ts; this only finds the pair and says who acted.
import { SUPPORT_STAFF } from "../auth/change-notices.ts";
import type { Deps, KeyActor, UserActor } from "../deps.ts";
import { NotMerged, NotFound } from "../errors.ts";
import { unmergeOnBehalf } from "./service.ts";

/**
 * Separates `accountId` from `partnerId`, the two accounts the support person confirmed, in
 * either order. It emits what the user's own unmerge emits (user.unmerged, user.updated, the
 * notices to both accounts' addresses), and user.unmerged also records who did it: `by: "support"`
 * and `api_key_id`, the secret key the support person used. Either
 * account outside the project is NotFound, the same answer as no account at all; a pair that is
 * not (or no longer) merged with each other is NotMerged.
 */
export async function unmergeForUser(deps: Deps, support: KeyActor, accountId: string, partnerId: string) {
  const accounts = await deps.prisma.account.findMany({
    where: { projectId: support.projectId, id: { in: [accountId, partnerId] } },
    select: { id: true, mergeRole: true, mergedWithId: true },
  });
  const account = accounts.find((a) => a.id === accountId);
  const partner = accounts.find((a) => a.id === partnerId);
  if (!account || !partner) throw new NotFound("no such account");
  if (account.mergedWithId !== partner.id) throw new NotMerged("these two accounts are not merged with each other");
  const [primary, secondary] = account.mergeRole === "primary" ? [account, partner] : [partner, account];
  // The primary acts, as in the user's own unmerge; there is no session behind it, and the
  // service's own check (under the accounts' locks) refuses a pair that changed meanwhile.
  const actor: UserActor = { ...support, clientAddress: SUPPORT_STAFF, user: { accountId: primary.id, sessionId: "", authTime: new Date(), authAgeMs: 0 } };
  const record = { by: "support", api_key_id: support.apiKeyId };
  const done = await unmergeOnBehalf(deps, actor, secondary.id, record);
  deps.logger.info({ projectId: support.projectId, primaryId: primary.id, secondaryId: secondary.id, ...record }, "accounts unmerged by support");
  return { ...done, primaryId: primary.id, secondaryId: secondary.id };
}
