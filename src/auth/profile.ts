// The signed-in user's own account: profile changes and deletion, each with its event.
import type { Deps, UserActor } from "../deps.ts";
import { transaction } from "../db/transaction.ts";
import { enqueue } from "../webhooks/outbox.ts";
import { AccountMerged, InvalidRequest, RateLimited, ReauthenticationRequired, Unauthenticated } from "../errors.ts";
import { loadAccount, userEventData, userObject } from "./accounts.ts";
import { consumePerAccount, type Limit } from "../rate-limit.ts";
import { requireRecentAuth } from "./recent-auth.ts";
import { lockForSession } from "./sessions.ts";
import { charLength, nameText, unshowable } from "../text.ts";

/** What each operation refuses with, besides bad credentials: its GraphQL field lists exactly these. */
export const PROFILE_ERRORS = {
  update: [InvalidRequest, ReauthenticationRequired, RateLimited],
  delete: [AccountMerged, ReauthenticationRequired],
};

/**
 * Every name change is a user.updated event to every subscribed webhook, retried until it is
 * received: unbounded, one signed-in account made 303 events in 15 s (30 aliased mutations a
 * request). 30 changes in 10 minutes is far more than a person editing their name needs
 * (docs/security.md, "Abuse limits").
 */
export const PROFILE_UPDATES_PER_ACCOUNT: Limit = { max: 30, windowSeconds: 600 };

/** Sets the display name; a name that does not change writes nothing and emits no event. */
export async function updateProfile(deps: Deps, actor: UserActor, input: { name: unknown }) {
  // counted in characters as people count them, in NFC, as stored (src/text.ts): a name of 150
  // emoji was refused as more than 200 characters, and a name re-sent in another spelling of
  // the same letters was a change, with its user.updated event
  const name = typeof input.name === "string" ? nameText(input.name) || null : undefined;
  if (name === undefined || (name !== null && charLength(name) > 200)) throw new InvalidRequest("name must be a string of at most 200 characters");
  // shown to the operator (dashboard) and to every app and webhook: nothing that garbles or
  // disguises the text around it, nor a name that shows nothing (src/text.ts)
  const why = name === null ? null : unshowable(name);
  if (why) throw new InvalidRequest(`name ${why}`);
  // the name reaches every app (ID tokens, userinfo) and webhook: a stale, stolen token must not set it
  await requireRecentAuth(deps, actor);
  const { projectId, user } = actor;
  await consumePerAccount(deps.db, "profile_updates_per_account", user.accountId, PROFILE_UPDATES_PER_ACCOUNT);
  return transaction(deps.prisma, async (tx) => {
    // a merge that ended this session while the request ran goes first: renaming a secondary
    // would break the unmerge's promise to restore it as it was (24th review)
    await lockForSession(tx, actor);
    const differs = name === null ? { name: { not: null } } : { OR: [{ name: null }, { name: { not: name } }] };
    const changed = await tx.account.updateMany({ where: { id: user.accountId, projectId, ...differs }, data: { name } });
    if (changed.count) await enqueue(tx, { projectId, eventType: "user.updated", data: await userEventData(tx, projectId, user.accountId) });
    const account = await loadAccount(tx, projectId, user.accountId);
    if (!account) throw new Unauthenticated("this account no longer exists");
    return account;
  });
}

/**
 * Deletes the signed-in account with its identifiers, passkeys, sessions and the apps it allowed.
 * A merged account must be unmerged first: deleting a primary would silently strand or take its
 * secondary with it.
 */
export async function deleteAccount(deps: Deps, actor: UserActor) {
  await requireRecentAuth(deps, actor);
  await transaction(deps.prisma, async (tx) => {
    const { projectId, user } = actor;
    // a merge of this account waits, or wins first; an intruder's request queued behind the
    // owner's unmerge, which ended his session, deleted the account (26th review)
    await lockForSession(tx, actor);
    const account = await loadAccount(tx, projectId, user.accountId);
    if (!account) throw new Unauthenticated("this account no longer exists");
    if (account.mergedWithId) throw new AccountMerged();
    await tx.account.delete({ where: { id: account.id } });
    // The apps the user allowed on the consent page go with the account: oauth_consents has no
    // foreign key to it and nothing else removes a consent but its client's deletion, so each
    // outlived the account for good (docs/oidc.md: remembered until withdrawn, the client
    // deleted, or the account deleted). What the apps hold ends with the sessions (docs/oidc.md).
    await tx.oAuthConsent.deleteMany({ where: { accountId: account.id, projectId } });
    await enqueue(tx, { projectId, eventType: "user.deleted", data: { user: userObject(account, "deleted") } });
  });
  return { deleted: true };
}
