// Re-authentication through an external identity provider: the signed-in user signs in again at
// a provider whose identity is on their account. An account whose only sign-ins are external
// has no code to receive, so this is how it proves "it's still me" before a sensitive change
// (docs/authentication.md, "Recent authentication"). Same session, new auth_time, amr "fed".
import type { Deps, UserActor } from "../../deps.ts";
import { transaction } from "../../db/transaction.ts";
import { lockAccounts } from "../../db/locks.ts";
import { ExternalSignInFailed, InvalidRedirectUri, InvalidRequest, OTPInvalid, ProviderNotFound, RateLimited, UpstreamUnavailable } from "../../errors.ts";
import { externalValue } from "../identifiers.ts";
import { markReauthenticated } from "../sessions.ts";
import { reissueTokens, type TokenResponse } from "../sign-in.ts";
import { provenFlow, startFlow, type CompleteInput, type StartInput, type Started } from "./flows.ts";

export const EXTERNAL_REAUTHENTICATION_ERRORS = {
  start: [InvalidRequest, ProviderNotFound, InvalidRedirectUri, UpstreamUnavailable, RateLimited],
  complete: [InvalidRequest, OTPInvalid, ExternalSignInFailed],
};

export function startExternalReauthentication(deps: Deps, actor: UserActor, input: StartInput): Promise<Started> {
  return startFlow(deps, actor, input, "reauth");
}

/**
 * The identity the provider signed in must be one of this account's own (as a code must go to
 * one of its own identifiers); then the session's auth_time moves. A retry of a flow already
 * used answers the same tokens while the session lives.
 */
export async function completeExternalReauthentication(deps: Deps, actor: UserActor, input: CompleteInput): Promise<TokenResponse> {
  const flow = await provenFlow(deps, actor, input, "reauth");
  if (flow.sessionId !== actor.user.sessionId) throw new OTPInvalid();
  await transaction(deps.prisma, async (tx) => {
    // the account's lock, which removing an identity takes: the identity is checked as it stands
    await lockAccounts(tx, actor.projectId, [actor.user.accountId]);
    const { count } = await tx.externalFlow.updateMany({ where: { id: flow.id, consumedAt: null }, data: { consumedAt: new Date(), result: { reauthenticated: true } } });
    if (count !== 1) return;
    const own = await tx.identifier.findFirst({
      where: { projectId: actor.projectId, accountId: actor.user.accountId, kind: "external", value: externalValue(flow.issuer, flow.subject) },
      select: { id: true },
    });
    if (!own) throw new ExternalSignInFailed("that sign-in is not one of this account's; re-authenticate with one of yours");
    await markReauthenticated(tx, actor, "fed", own.id);
  });
  return reissueTokens(deps, actor);
}
