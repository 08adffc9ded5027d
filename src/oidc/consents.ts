// What a user allowed a third-party client on the consent page, remembered per user and client
// until the user revokes it. Revoking also ends what the client holds for the user: its grants,
// and with them their refresh tokens and sessions (src/oidc/adapter.ts).
import type { Deps, UserActor } from "../deps.ts";
import { endSessions } from "../auth/sessions.ts";
import { requireRecentAuth } from "../auth/recent-auth.ts";
import { NotFound } from "../errors.ts";
import { transaction } from "../db/transaction.ts";

export async function revokeConsent(deps: Deps, actor: UserActor, clientId: string): Promise<{ clientId: string }> {
  // a stale, stolen token must not be able to cut the owner's apps off (docs/security.md)
  await requireRecentAuth(deps, actor);
  const { accountId } = actor.user;
  return transaction(deps.prisma, async (tx) => {
    const { count } = await tx.oAuthConsent.updateMany({
      where: { accountId, clientId, projectId: actor.projectId, revokedAt: null },
      data: { revokedAt: new Date() },
    });
    if (!count) throw new NotFound("this account has not allowed that app anything");
    const grants = await tx.$queryRaw<{ session_id: string | null }[]>`
      DELETE FROM oidc_payloads WHERE kind = 'Grant' AND payload->>'clientId' = ${clientId} AND payload->>'accountId' = ${accountId}
      RETURNING session_id`;
    await tx.$executeRaw`DELETE FROM oidc_payloads WHERE kind <> 'Grant' AND payload->>'clientId' = ${clientId} AND payload->>'accountId' = ${accountId}`;
    for (const g of grants) if (g.session_id) await endSessions(tx, { id: g.session_id });
    return { clientId };
  });
}
