// Support staff acting on an account for its user, with the project's secret key: separating a
// merge. The rules stay in service.ts; this only says who acted.
import type { Deps, KeyActor } from "../deps.ts";
import { unmergeOnBehalf } from "./service.ts";

/**
 * Separates `accountId` from `partnerId`, the two accounts the support person confirmed, in
 * either order. It emits what the user's own unmerge emits (user.unmerged, user.updated, the
 * notices to both accounts' addresses), and user.unmerged also records who did it: `by: "support"`
 * and `api_key_id`, the secret key the support person used. Either
 * account outside the project is NotFound, the same answer as no account at all; a pair that is
 * not (or no longer) merged with each other is NotMerged. Both are decided under the accounts'
 * locks (unmergeOnBehalf), not from a read made before them.
 */
export async function unmergeForUser(deps: Deps, support: KeyActor, accountId: string, partnerId: string) {
  const record = { by: "support", api_key_id: support.apiKeyId };
  const done = await unmergeOnBehalf(deps, support, accountId, partnerId, record);
  deps.logger.info({ projectId: support.projectId, primaryId: done.primaryId, secondaryId: done.secondaryId, ...record }, "accounts unmerged by support");
  return done;
}
