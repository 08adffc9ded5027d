// Linking an external identity to the signed-in account (docs/external-identities.md, "Linking").
// The sign-in at the provider proves ownership, as a code proves an e-mail; from there the
// decision is link_verify's, unchanged (src/linking/link-verify.sql): the completed flow becomes
// a link state whose code is the flow's one-time code, and verify's decision table, events and
// notices apply as for any identifier.
import type { Deps, UserActor } from "../deps.ts";
import { transaction } from "../db/transaction.ts";
import { InvalidRedirectUri, InvalidRequest, OTPInvalid, ProviderNotFound, RateLimited, ReauthenticationRequired, UpstreamUnavailable } from "../errors.ts";
import { newId } from "../ids.ts";
import { externalValue, type Identifier } from "../auth/identifiers.ts";
import { codeHash } from "../auth/otp.ts";
import { checkInStatement } from "../auth/otp-flow.ts";
import { requireRecentAuth } from "../auth/recent-auth.ts";
import { provenFlow, saveClaims, startFlow, type CompleteInput, type ProvenFlow, type StartInput, type Started } from "../auth/external/flows.ts";
import { decideLink, LINK_ERRORS, linkBinding, type VerifyResult } from "./service.ts";

export const EXTERNAL_LINK_ERRORS = {
  start: [InvalidRequest, ProviderNotFound, InvalidRedirectUri, UpstreamUnavailable, ReauthenticationRequired, RateLimited],
  verify: [InvalidRequest, ...LINK_ERRORS.verify],
};

/** Checked when the link starts, as for a code: the verify of a flow started now needs no fresh check. */
export async function startExternalLink(deps: Deps, actor: UserActor, input: StartInput): Promise<Started> {
  await requireRecentAuth(deps, actor);
  return startFlow(deps, actor, input, "link");
}

export async function verifyExternalLink(deps: Deps, actor: UserActor, input: CompleteInput): Promise<VerifyResult> {
  const flow = await provenFlow(deps, actor, input, "link");
  // the session that started it, as a code's link state (linkBinding): another session of the
  // account, a stale stolen token that could not start a link, finished one whose session the
  // owner had ended, and attached the intruder's identity
  if (flow.sessionId !== actor.user.sessionId) throw new OTPInvalid();
  const code = input.code as string;
  const identifier: Identifier = { kind: "external", value: externalValue(flow.issuer, flow.subject) };
  const stateId = await linkState(deps, actor, flow, identifier, code);
  const binding = linkBinding(actor);
  const result = await decideLink(deps, actor, binding, checkInStatement(deps, binding, stateId, code, actor.clientAddress), identifier);
  await saveProfile(deps, actor.projectId, identifier, flow);
  return result;
}

/**
 * The link state of a completed flow, written once: the first verify consumes the flow and
 * writes the state; a retry finds it, and link_verify answers the retry with the stored result.
 */
async function linkState(deps: Deps, actor: UserActor, flow: ProvenFlow, identifier: Identifier, code: string): Promise<string> {
  return transaction(deps.prisma, async (tx) => {
    const id = newId("otp");
    const { count } = await tx.externalFlow.updateMany({ where: { id: flow.id, consumedAt: null }, data: { consumedAt: new Date(), result: { link_state: id } } });
    if (count !== 1) {
      const done = await tx.externalFlow.findUnique({ where: { id: flow.id }, select: { result: true } });
      const stored = (done?.result as { link_state?: string } | null)?.link_state;
      if (!stored) throw new OTPInvalid();
      return stored;
    }
    await tx.otpState.create({
      data: {
        id,
        projectId: actor.projectId,
        accountId: actor.user.accountId,
        // bound to this session, as a code's link state is (src/linking/service.ts linkBinding)
        sessionId: actor.user.sessionId,
        purpose: "link",
        kind: identifier.kind,
        value: identifier.value,
        codeHash: codeHash(deps.otpKey, id, code),
        expiresAt: flow.expiresAt,
      },
    });
    return id;
  });
}

/** The provider's latest profile claims on the identifier, wherever the decision left it. */
async function saveProfile(deps: Deps, projectId: string, identifier: Identifier, flow: ProvenFlow): Promise<void> {
  const row = await deps.prisma.identifier.findUnique({ where: { projectId_kind_value: { projectId, ...identifier } }, select: { id: true } });
  if (row) await transaction(deps.prisma, (tx) => saveClaims(tx, row.id, flow));
}
