// Signing in with an external identity (docs/external-identities.md, "Signing in"). The identity
// is (issuer, subject), an identifier like an e-mail or a phone: a known one signs into its
// primary account; an unknown one creates an account, unless the provider asserts a verified
// e-mail that an existing account holds. Then nothing is created or linked until the user proves
// that e-mail with a code: a provider that lets its users claim any address (the "nOAuth" attacks)
// takes over nothing. An unverified e-mail claim decides nothing at all.
import type { Actor, Deps } from "../../deps.ts";
import type { Tx } from "../../db/client.ts";
import { DecideAgain, transaction } from "../../db/transaction.ts";
import { Prisma } from "../../generated/prisma/client.ts";
import { ExternalSignInFailed, InvalidIdentifier, InvalidRedirectUri, InvalidRequest, OTPInvalid, PasskeyInvalid, ProviderNotFound, RateLimited, UpstreamUnavailable } from "../../errors.ts";
import { newId } from "../../ids.ts";
import { attachedEvents } from "../../webhooks/event-types.ts";
import { enqueue, enqueueAll } from "../../webhooks/outbox.ts";
import { userEventData } from "../accounts.ts";
import { announce, signInIdentifiers } from "../change-notices.ts";
import { externalValue, type Contact, type Identifier } from "../identifiers.ts";
import { recordKnownPlaces } from "../known-places.ts";
import { maskIdentifier } from "../notices.ts";
import { consumeOtp, storedResult, storeResult } from "../otp.ts";
import { lockPasskeyAccount, verifyPasskeyAssertion } from "../passkeys.ts";
import { sendOtp, verifyOtp } from "../otp-flow.ts";
import { assertLiveSession } from "../sessions.ts";
import { holderPrimaryOf, issueTokens, primaryOf, startSession, type TokenResponse } from "../sign-in.ts";
import { provenFlow, saveClaims, startFlow, type CompleteInput, type ProvenFlow, type StartInput, type Started } from "./flows.ts";

export const EXTERNAL_SIGN_IN_ERRORS = {
  start: [InvalidRequest, ProviderNotFound, InvalidRedirectUri, UpstreamUnavailable, RateLimited],
  complete: [InvalidRequest, OTPInvalid, ExternalSignInFailed, RateLimited],
  confirm: [OTPInvalid, ExternalSignInFailed, RateLimited],
  confirmWithPasskey: [InvalidRequest, OTPInvalid, PasskeyInvalid, ExternalSignInFailed],
};

/** The e-mail must be proven first: a code went to `destination`; /auth/external/confirm finishes. */
export type VerificationRequired = { verification_required: "email"; state_id: string; destination: string };
type SignedIn = { account_id: string; session_id: string };
type FlowResult = SignedIn | VerificationRequired;

export function startExternalSignIn(deps: Deps, actor: Actor, input: StartInput): Promise<Started> {
  return startFlow(deps, actor, input, "sign_in");
}

/**
 * Tokens, or the e-mail to prove first. A retry with the same state_id and code answers the
 * same (fresh tokens for the same session while it lives), as a verify of a code does.
 */
export async function completeExternalSignIn(deps: Deps, actor: Actor, input: CompleteInput): Promise<TokenResponse | VerificationRequired> {
  const flow = await provenFlow(deps, actor, input, "sign_in");
  const decided = await transaction(deps.prisma, (tx) => decideOnce(tx, actor, flow));
  let result = decided.result;
  if ("collision" in result) result = await askForEmail(deps, actor, flow, result.collision).catch((err) => giveBack(deps, flow, err));
  if ("verification_required" in result) return result;
  if (!decided.fresh) await assertLiveSession(deps.prisma, actor.projectId, result.session_id, result.account_id);
  return issueTokens(deps, actor.projectId, result.account_id, result.session_id);
}

type Decision = { result: FlowResult | { collision: Contact }; fresh: boolean };

/** The flow's row lock orders parallel completions: one decides, the rest read its result. */
async function decideOnce(tx: Tx, actor: Actor, flow: ProvenFlow): Promise<Decision> {
  const { count } = await tx.externalFlow.updateMany({ where: { id: flow.id, consumedAt: null }, data: { consumedAt: new Date() } });
  if (count !== 1) {
    const done = await tx.externalFlow.findUnique({ where: { id: flow.id }, select: { result: true } });
    if (!done?.result) throw new OTPInvalid();
    return { result: done.result as FlowResult, fresh: false };
  }
  const value = externalValue(flow.issuer, flow.subject);
  const known = await tx.identifier.findUnique({
    where: { projectId_kind_value: { projectId: actor.projectId, kind: "external", value } },
    select: { id: true, accountId: true },
  });
  let accountId: string;
  if (known) {
    accountId = await holderPrimaryOf(tx, actor.projectId, known.accountId);
    // read again under the lock: an unmerge that committed meanwhile may have removed the
    // identity, and a session opened here would stay on the primary, signed in with what it no
    // longer holds (24th review)
    const still = await tx.identifier.findUnique({ where: { id: known.id }, select: { accountId: true } });
    if (still?.accountId !== known.accountId) throw new DecideAgain("the identity moved to another account");
    await saveClaims(tx, known.id, flow);
  } else {
    const holder = flow.email && flow.emailVerified ? await emailHolder(tx, actor.projectId, flow.email) : null;
    // decided after the commit: the code is sent outside this transaction
    if (holder) return { result: { collision: holder }, fresh: true };
    accountId = await createAccount(tx, actor.projectId, flow, value);
  }
  const signedIn = await signIn(tx, actor, accountId, flow);
  await tx.externalFlow.update({ where: { id: flow.id }, data: { result: signedIn } });
  return { result: signedIn, fresh: true };
}

async function emailHolder(tx: Tx, projectId: string, email: string): Promise<Contact | null> {
  const row = await tx.identifier.findUnique({ where: { projectId_kind_value: { projectId, kind: "email", value: email } }, select: { id: true } });
  return row ? { kind: "email", value: email } : null;
}

async function createAccount(tx: Tx, projectId: string, flow: ProvenFlow, value: string): Promise<string> {
  const id = newId("acc");
  const identifierId = newId("idt");
  await tx.account.create({
    data: { id, projectId, name: flow.name, identifiers: { create: { id: identifierId, projectId, kind: "external", value, origin: "own" } } },
  });
  await saveClaims(tx, identifierId, flow);
  await enqueue(tx, { projectId, eventType: "user.created", data: await userEventData(tx, projectId, id) });
  return id;
}

async function signIn(tx: Tx, actor: Actor, accountId: string, flow: ProvenFlow): Promise<SignedIn> {
  const provider = await tx.identityProvider.findUnique({ where: { id: flow.providerId }, select: { slug: true } });
  // the identity it proved: removing it, or unmerging the account it is on, ends the session
  const identity = await tx.identifier.findUnique({
    where: { projectId_kind_value: { projectId: actor.projectId, kind: "external", value: externalValue(flow.issuer, flow.subject) } },
    select: { id: true },
  });
  // removed while this sign-in waited for the account's lock, which its removal holds
  if (!identity) throw new ExternalSignInFailed("that sign-in was removed from its account; start again");
  const sessionId = await startSession(
    tx,
    actor,
    accountId,
    "fed",
    [["user.authentication.success", { method: "external", identifier_type: "external", provider: provider?.slug ?? null }]],
    identity.id,
  );
  return { account_id: accountId, session_id: sessionId };
}

/**
 * The e-mail's code was not sent (the mail server down: 503, or a limit: 429): the flow is not
 * used up, so the same completion retried later asks again. Parallel completions still decide
 * once: the others found the flow used up while this one tried (docs/external-identities.md).
 */
async function giveBack(deps: Deps, flow: ProvenFlow, err: unknown): Promise<never> {
  await deps.prisma.externalFlow.updateMany({ where: { id: flow.id, result: { equals: Prisma.DbNull } }, data: { consumedAt: null } });
  throw err;
}

/**
 * The provider asserts a verified e-mail that an account holds: a code goes to that e-mail (with
 * every limit of a sign-in code), and only a right code attaches the identity to that account.
 */
async function askForEmail(deps: Deps, actor: Actor, flow: ProvenFlow, email: Contact): Promise<VerificationRequired> {
  const binding = { projectId: actor.projectId, accountId: null, purpose: "external_confirm" as const };
  // which service: an owner asked to read the code out to someone can tell it is not her doing
  const provider = await deps.prisma.identityProvider.findUnique({ where: { id: flow.providerId }, select: { displayName: true } });
  const subject = `Confirm it's you to connect your ${provider?.displayName ?? "other"} sign-in`;
  const { stateId } = await sendOtp(deps, binding, email, subject, actor.clientAddress).catch((err) => {
    // the provider named the address, not the caller: not the caller's bad input
    throw err instanceof InvalidIdentifier ? new ExternalSignInFailed("the e-mail address the provider named does not accept mail") : err;
  });
  await deps.prisma.otpState.update({ where: { id: stateId }, data: { externalFlowId: flow.id } });
  const result: VerificationRequired = { verification_required: "email", state_id: stateId, destination: maskIdentifier(email) };
  // Conditional: deleting the provider (or pointing it at another issuer) ends its flows, and one
  // that did so while the code was being sent left no row for Prisma's update, which threw: the
  // completion answered 500 InternalError. It is refused as a completion of a flow its provider's
  // deletion ended is (docs/external-identities.md, "Signing in"); the code sent confirms
  // nothing, its flow being gone (joinOnce).
  const { count } = await deps.prisma.externalFlow.updateMany({ where: { id: flow.id }, data: { result } });
  if (!count) throw new ExternalSignInFailed("the sign-in to connect is gone; start again");
  return result;
}

/**
 * The code sent to the e-mail the provider named: signs into that e-mail's (primary) account and
 * attaches the external identity to it, announced like any identifier added by linking.
 */
export async function confirmExternalSignIn(deps: Deps, actor: Actor, input: { stateId?: unknown; otp?: unknown }): Promise<TokenResponse> {
  const binding = { projectId: actor.projectId, accountId: null, purpose: "external_confirm" as const };
  const checked = await verifyOtp(deps, binding, input.stateId, input.otp, actor.clientAddress);
  const stateId = input.stateId as string;
  const stored = checked.result as SignedIn | null;
  const { signedIn, replayed } = stored
    ? { signedIn: stored, replayed: true }
    : await transaction(deps.prisma, async (tx) => {
        const joined = await joinOnce(tx, actor, stateId, checked.identifier.value);
        await recordKnownPlaces(tx, actor.projectId, checked.identifier, actor.clientAddress);
        return joined;
      });
  return tokensFor(deps, actor, signedIn, replayed);
}

/**
 * The other proof the account's owner can give: a passkey of the account that holds the e-mail
 * (an assertion for options from /auth/passkey/sign-in/options), instead of the code.
 */
export async function confirmExternalSignInWithPasskey(deps: Deps, actor: Actor, input: { stateId?: unknown; response?: unknown }): Promise<TokenResponse> {
  const stateId = input.stateId;
  if (typeof stateId !== "string" || !stateId || stateId.length > 100) throw new InvalidRequest("send the state_id of verification_required");
  const { passkey } = await verifyPasskeyAssertion(deps, actor, input.response);
  const { signedIn, replayed } = await transaction(deps.prisma, async (tx) => {
    // expired by the database's clock, which dated the code (src/rate-limit.ts), as a code's
    // verify judges it: this gateway's own, running behind, took the passkey after the state had
    // expired (docs/operations.md, "Clocks")
    const [state] = await tx.$queryRaw<{ value: string }[]>`
      SELECT value FROM otp_states
      WHERE id = ${stateId} AND project_id = ${actor.projectId} AND purpose = 'external_confirm' AND expires_at > now()`;
    if (!state) throw new OTPInvalid();
    return joinOnce(tx, actor, stateId, state.value, passkey);
  });
  // a retry of a confirmation that succeeded answers its session only while it lives, as the
  // code's retry does (docs/external-identities.md): it answered fresh tokens for an ended one
  return tokensFor(deps, actor, signedIn, replayed);
}

async function tokensFor(deps: Deps, actor: Actor, signedIn: SignedIn, replayed: boolean): Promise<TokenResponse> {
  if (replayed) await assertLiveSession(deps.prisma, actor.projectId, signedIn.session_id, signedIn.account_id);
  deps.notices.kick();
  return issueTokens(deps, actor.projectId, signedIn.account_id, signedIn.session_id);
}

/**
 * Under the state's row lock: signs into the primary account of the e-mail and attaches the
 * identity to it, remembering what proved it (`provenBy`: the address its code went to, or the
 * passkey): one proven through a merged secondary is removed on unmerge (src/auth/proofs.ts).
 * It stayed on the primary after the unmerge before (seventeenth review), and so did one proven
 * with an address or passkey the secondary's holder had added to the primary (27th); attached to
 * the secondary itself, it could not be removed without unmerging, nor re-authenticate the
 * primary's sessions (twentieth). With `passkey`, it must sign into that same primary, on a retry
 * of a state that already succeeded too: the stored sign-in goes only to a passkey of its account
 * (any passkey of the project, a stranger's own, used to get it).
 */
async function joinOnce(tx: Tx, actor: Actor, stateId: string, email: string, passkey?: { id: string }): Promise<{ signedIn: SignedIn; replayed: boolean }> {
  if (!(await consumeOtp(tx, stateId))) {
    const done = (await storedResult(tx, stateId)) as SignedIn | null;
    if (!done) throw new OTPInvalid();
    if (passkey) await assertPasskeyOf(tx, actor, passkey.id, await primaryOf(tx, actor.projectId, done.account_id));
    return { signedIn: done, replayed: true };
  }
  const state = await tx.otpState.findUnique({ where: { id: stateId }, select: { externalFlowId: true } });
  const flow = state?.externalFlowId ? await tx.externalFlow.findUnique({ where: { id: state.externalFlowId } }) : null;
  const holder = await tx.identifier.findUnique({
    where: { projectId_kind_value: { projectId: actor.projectId, kind: "email", value: email } },
    select: { id: true, accountId: true },
  });
  if (!flow?.issuer || !flow.subject || !holder) throw new ExternalSignInFailed("the sign-in to connect is gone; start again");
  const accountId = await holderPrimaryOf(tx, actor.projectId, holder.accountId);
  // what proves it, read again under the account's lock: a removal or unmerge that waited ahead
  // of this may have taken the address or the passkey away, and a proof that is gone cuts the
  // unmerge's chain (27th review)
  const still = await tx.identifier.findUnique({ where: { id: holder.id }, select: { accountId: true } });
  if (still?.accountId !== holder.accountId) throw new DecideAgain("the address moved or went");
  if (passkey) await assertPasskeyOf(tx, actor, passkey.id, accountId);
  await attachIdentity(tx, actor, accountId, flow as ProvenFlow, passkey?.id ?? holder.id);
  const signedIn = await signIn(tx, actor, accountId, flow as ProvenFlow);
  await storeResult(tx, stateId, signedIn);
  return { signedIn, replayed: false };
}

/** The passkey signs in to `accountId`, read under its account's lock (lockPasskeyAccount): not where it was before an unmerge gave it back. */
async function assertPasskeyOf(tx: Tx, actor: Actor, passkeyId: string, accountId: string): Promise<void> {
  if ((await lockPasskeyAccount(tx, actor.projectId, passkeyId)) !== accountId) throw new PasskeyInvalid("that passkey does not sign in to the account of that address");
}

/**
 * Attaches the identity (unless it already signs into this account), with the events and notices
 * of an attach; `provenBy`: the address or passkey that proved it (joinOnce).
 */
async function attachIdentity(tx: Tx, actor: Actor, accountId: string, flow: ProvenFlow, provenBy: string | null): Promise<void> {
  const identifier: Identifier = { kind: "external", value: externalValue(flow.issuer, flow.subject) };
  const existing = await tx.identifier.findUnique({
    where: { projectId_kind_value: { projectId: actor.projectId, ...identifier } },
    select: { id: true, accountId: true },
  });
  if (existing) {
    // it was connected meanwhile (by another tab): fine where it leads here, refused elsewhere
    if ((await holderPrimaryOf(tx, actor.projectId, existing.accountId)) !== accountId) throw new ExternalSignInFailed("that sign-in is connected to another account");
    return;
  }
  const id = newId("idt");
  await tx.identifier.create({ data: { id, projectId: actor.projectId, accountId, ...identifier, origin: "attached" } });
  await saveClaims(tx, id, flow);
  if (provenBy) await tx.externalIdentity.update({ where: { identifierId: id }, data: { provenBy } });
  await tx.account.update({ where: { id: accountId }, data: { updatedAt: new Date() } });
  const { user } = await userEventData(tx, actor.projectId, accountId);
  await enqueueAll(tx, attachedEvents(identifier).map(([eventType, extra]) => ({ projectId: actor.projectId, eventType, data: { user, ...extra } })));
  await announce(tx, actor, { kind: "attached", identifier }, await signInIdentifiers(tx, accountId));
}
