// Re-authentication: the signed-in user proves again that they hold one of the account's own
// identifiers (a code) or one of its passkeys. The session stays the same (same `sid` in every
// token) and its auth_time moves; a sign-in elsewhere never refreshes this session.
import type { Deps, UserActor } from "../deps.ts";
import { transaction } from "../db/transaction.ts";
import { lockAccounts } from "../db/locks.ts";
import { IDENTIFIER_INPUT_ERRORS, IdentifierNotLinked, OTPInvalid, RateLimited } from "../errors.ts";
import { parseIdentifier } from "./identifiers.ts";
import { recordKnownPlaces } from "./known-places.ts";
import { consumeOtp, storedResult, storeResult } from "./otp.ts";
import { sendOtp, verifyOtp } from "./otp-flow.ts";
import { markReauthenticated } from "./sessions.ts";
import { reissueTokens, type TokenResponse } from "./sign-in.ts";

const binding = (actor: UserActor) => ({
  projectId: actor.projectId,
  accountId: actor.user.accountId,
  purpose: "reauth" as const,
  sessionId: actor.user.sessionId,
});

/** Sends a code to one of the account's own identifiers; any other is refused and nothing is sent. */
/**
 * What each operation refuses with, besides bad credentials: its REST route and its GraphQL field
 * both list exactly these.
 */
export const REAUTHENTICATION_ERRORS = {
  start: [...IDENTIFIER_INPUT_ERRORS, IdentifierNotLinked, RateLimited],
  complete: [OTPInvalid, RateLimited],
};

export async function startReauthentication(deps: Deps, actor: UserActor, input: { email?: unknown; phone?: unknown }) {
  const identifier = parseIdentifier(input);
  const own = await deps.prisma.identifier.count({
    where: { projectId: actor.projectId, accountId: actor.user.accountId, kind: identifier.kind, value: identifier.value },
  });
  if (!own) throw new IdentifierNotLinked("re-authenticate with one of your own addresses");
  return sendOtp(deps, binding(actor), identifier, "Confirm it's you", actor.clientAddress);
}

export async function completeReauthentication(deps: Deps, actor: UserActor, input: { stateId: unknown; otp: unknown }): Promise<TokenResponse> {
  const checked = await verifyOtp(deps, binding(actor), input.stateId, input.otp, actor.clientAddress);
  if (!checked.result) {
    await transaction(deps.prisma, async (tx) => {
      // the account's lock, which removing an identifier takes: the address is checked as it stands
      await lockAccounts(tx, actor.projectId, [actor.user.accountId]);
      if (!(await consumeOtp(tx, input.stateId as string))) {
        if (!(await storedResult(tx, input.stateId as string))) throw new OTPInvalid();
        return;
      }
      const proved = await tx.identifier.findFirst({
        where: { projectId: actor.projectId, accountId: actor.user.accountId, kind: checked.identifier.kind, value: checked.identifier.value },
        select: { id: true },
      });
      // no longer one of the account's own (removed since the code was sent, whoever holds it now)
      if (!proved) throw new OTPInvalid();
      await markReauthenticated(tx, actor, "otp", proved.id);
      await recordKnownPlaces(tx, actor.projectId, checked.identifier, actor.clientAddress);
      await storeResult(tx, input.stateId as string, { reauthenticated: true });
    });
  }
  return reissueTokens(deps, actor);
}
