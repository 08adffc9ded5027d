// What a user allowed a third-party client on the consent page, remembered per user and client
// until the user revokes it. Revoking also ends what the client holds for the user: its grants,
// and with them their refresh tokens and sessions (src/oidc/grants.ts).
import type { Deps, UserActor } from "../deps.ts";
import type { Tx } from "../db/client.ts";
import { requireRecentAuth } from "../auth/recent-auth.ts";
import { lockForSession } from "../auth/sessions.ts";
import { NotFound } from "../errors.ts";
import { transaction } from "../db/transaction.ts";
import { endGrants } from "./grants.ts";

export async function revokeConsent(deps: Deps, actor: UserActor, clientId: string): Promise<{ clientId: string }> {
  // a stale, stolen token must not be able to cut the owner's apps off (docs/security.md)
  await requireRecentAuth(deps, actor);
  const { accountId } = actor.user;
  return transaction(deps.prisma, async (tx) => {
    // The account first, as an unmerge takes it before the sessions and consents it changes: an
    // unmerge ended the session an app's grant is bound to (signed in with the secondary's
    // address) and then came to the consent this had locked, while this waited for that session,
    // and the two deadlocked until Postgres broke it after deadlock_timeout (1 s). Also refuses a
    // session that a merge or unmerge ended meanwhile (docs/authentication.md, "Sessions").
    await lockForSession(tx, actor);
    const { count } = await tx.oAuthConsent.updateMany({
      where: { accountId, clientId, projectId: actor.projectId, revokedAt: null },
      data: { revokedAt: new Date() },
    });
    // a grant without a remembered consent is withdrawn too: one the app got while it was
    // first-party (no consent page, so nothing remembered) and kept after it became a third
    // party's (twenty-third review)
    const grants = await endGrants(tx, { clientId, accountId });
    if (!count && !grants) throw new NotFound("this account has not allowed that app anything");
    return { clientId };
  });
}

export type AuthorizedApp = { clientId: string; name: string; scopes: string[]; allowedAt: Date };

/** How many of them a page lists: far more than a person allows, and a bound on the work. */
export const AUTHORIZED_APPS_LISTED = 100;

/**
 * The apps the signed-in user allowed on the consent page and has not withdrawn, the latest first:
 * what the account page shows, each withdrawn with revokeConsent. Read by the actor's account
 * and project, so nobody else's are found.
 */
export async function authorizedApps(deps: Deps, actor: UserActor): Promise<AuthorizedApp[]> {
  const { projectId, user } = actor;
  const consents = await deps.prisma.oAuthConsent.findMany({
    where: { accountId: user.accountId, projectId, revokedAt: null },
    orderBy: [{ createdAt: "desc" }, { clientId: "asc" }],
    take: AUTHORIZED_APPS_LISTED,
  });
  const clients = await deps.prisma.oAuthClient.findMany({ where: { projectId, clientId: { in: consents.map((c) => c.clientId) } }, select: { clientId: true, name: true } });
  const names = new Map(clients.map((c) => [c.clientId, c.name]));
  return consents.flatMap((c) => {
    const name = names.get(c.clientId);
    return name ? [{ clientId: c.clientId, name, scopes: c.scopes, allowedAt: c.createdAt }] : [];
  });
}

/**
 * An unmerge withdraws every consent the primary remembers (a sign-in with the secondary's address
 * landed on the primary while merged, so the other person may have given them) and ends what the
 * third-party apps hold for the account on their strength: the grants, refresh tokens and the
 * sessions they are bound to, as revokeConsent does. Kept, an app the other person approved went
 * on reading the owner's claims with a refresh token taken at the owner's own sign-in (no page
 * asked, the consent was remembered), while "Apps you allowed" no longer listed it (34th review).
 * First-party apps keep theirs: no consent page gave them anything.
 */
export async function withdrawConsentsOnUnmerge(tx: Tx, projectId: string, accountId: string): Promise<void> {
  const consents = await tx.oAuthConsent.findMany({ where: { accountId, projectId, revokedAt: null }, select: { clientId: true } });
  if (consents.length === 0) return;
  await tx.oAuthConsent.updateMany({ where: { accountId, projectId, revokedAt: null }, data: { revokedAt: new Date() } });
  const thirdParty = await tx.oAuthClient.findMany({
    where: { projectId, firstParty: false, clientId: { in: consents.map((c) => c.clientId) } },
    select: { clientId: true },
  });
  for (const { clientId } of thirdParty) await endGrants(tx, { clientId, accountId });
}
