// Identifier linking (docs/rest.md, linking): request, verify (attach or merge, decided by the
// link_verify statement alone, see verifyLink), remove and unmerge. GraphQL and REST both call
// these functions; no rule lives anywhere else.
import { randomBytes } from "node:crypto";
import type { Deps, KeyActor, UserActor } from "../deps.ts";
import type { Tx } from "../db/client.ts";
import { run } from "../db/fast.ts";
import { DecideAgain, retryingConflicts, transaction } from "../db/transaction.ts";
import { DELIVERY_CHANNEL, enqueueAll, envelope } from "../webhooks/outbox.ts";
import { attachedEvents, type EventType } from "../webhooks/event-types.ts";
import {
  AlreadyLinked,
  CannotLinkSelf,
  IDENTIFIER_INPUT_ERRORS,
  IdentifierNotLinked,
  LastIdentifier,
  NotFound,
  NotMerged,
  OTPInvalid,
  RateLimited,
  ReauthenticationRequired,
  TargetAlreadyLinked,
  TargetSecondaryIdentity,
  Unauthenticated,
} from "../errors.ts";
import { newId, newOrderedId } from "../ids.ts";
import { parseIdentifier, parseRemovable, phoneSignsIn, type Identifier } from "../auth/identifiers.ts";
import type { OtpBinding } from "../auth/otp.ts";
import { refuseCapped, refuseForWrongCodes, sendOtp, verifyInStatement, verifyOtp, wrongCode, type VerifyInStatement } from "../auth/otp-flow.ts";
import { endSessionsSignedInWith, lockForSession } from "../auth/sessions.ts";
import { handOnProofs, provenThroughSecondary } from "../auth/proofs.ts";
import { withdrawConsentsOnUnmerge } from "../oidc/consents.ts";
import { userEventData } from "../auth/accounts.ts";
import { announce, identifiersOf, noticeText, signInIdentifiers, SUPPORT_STAFF } from "../auth/change-notices.ts";
import { requireRecentAuth } from "../auth/recent-auth.ts";
import { lockAccountAndPartner, lockAccounts, type LockedAccount } from "../db/locks.ts";
import { clearMerge, LINK_STATE, runLinkVerify, type LinkVerifyInput } from "./sql.ts";

/**
 * What each operation refuses with, besides bad credentials: the REST route and the GraphQL
 * field of the operation both list exactly these (docs/rest.md, docs/graphql.md).
 */
export const LINK_ERRORS = {
  request: [...IDENTIFIER_INPUT_ERRORS, CannotLinkSelf, ReauthenticationRequired, RateLimited],
  verify: [OTPInvalid, RateLimited, CannotLinkSelf, AlreadyLinked, TargetAlreadyLinked, TargetSecondaryIdentity],
  remove: [...IDENTIFIER_INPUT_ERRORS, IdentifierNotLinked, LastIdentifier, ReauthenticationRequired],
  unmerge: [NotMerged, ReauthenticationRequired],
};

export type LinkOutcome = "attached" | "merged";
export type VerifyResult = { message: "Account linked successfully"; outcome: LinkOutcome };

type IdentifierInput = { email?: unknown; phone?: unknown };

/**
 * The signed-in account read under a row lock, in the caller's project (another project's
 * account is not found). The caller authenticated before taking the lock: its account may have
 * been deleted or merged away as a secondary since, and its session ended by a merge, a removal
 * or a sign-out on another gateway (an intruder's request queued behind the owner's unmerge
 * removed the owner's address: 26th review). So the session is checked again here, and a
 * secondary never acts: either is answered like any ended session.
 */
async function currentAccount(tx: Tx, actor: UserActor): Promise<LockedAccount> {
  // The account and its merge partner, locked together in id order as a sign-in locks them
  // (src/auth/sign-in.sql): separating them needs both, and locking the account first and its
  // secondary afterwards deadlocked with a sign-in with the secondary's address whenever the
  // secondary's id sorted first (test/security.sign-in-lock-order.test.ts).
  const locked = await lockAccountAndPartner(tx, actor.projectId, actor.user.accountId);
  const me = locked.find((a) => a.id === actor.user.accountId);
  // merged with another while this waited for the lock: that partner is not locked
  if (me?.merged_with_id && !locked.some((a) => a.id === me.merged_with_id)) throw new DecideAgain("the account was merged meanwhile");
  return (await lockForSession(tx, actor)).account;
}

export async function requestLink(deps: Deps, actor: UserActor, input: IdentifierInput): Promise<{ stateId: string }> {
  const identifier = parseIdentifier(input);
  // Checked when the link starts; the verify of a state issued now needs no fresh check.
  await requireRecentAuth(deps, actor);
  const binding = linkBinding(actor);
  // Only what the caller already knows is checked here (in the send's own statement, before
  // anything is counted); who else holds the identifier is decided at verify, after the code
  // proved ownership, so this answer reveals nothing.
  const notOwnedBy = { accountId: actor.user.accountId, refuse: () => new CannotLinkSelf() };
  return sendOtp(deps, binding, identifier, "Confirm the address you are adding", actor.clientAddress, notOwnedBy);
}

const LINKED = "Account linked successfully" as const;

/**
 * A link state is bound to the session that asked for it, whose recent authentication allowed
 * it (docs/authentication.md, "Codes"): bound to the account alone, a state whose session the
 * owner had ended (removing the address it signed in with, an unmerge) was completed from
 * another session of the account, a stale stolen token that could not start a link itself, and
 * attached the intruder's address.
 */
export function linkBinding(actor: UserActor): OtpBinding & { accountId: string; sessionId: string } {
  return { projectId: actor.projectId, accountId: actor.user.accountId, purpose: "link", sessionId: actor.user.sessionId };
}

/**
 * The verify is decided in one statement, link_verify (src/linking/link-verify.sql), which
 * holds the rules: the account's wrong-code limit,
 * the try counted under the state's row lock (a retried verify of a state that succeeded gets
 * its stored answer), the current account and the identifier's holder locked together in id
 * order (two accounts merging each other cannot deadlock) and the holder read again under the
 * locks, then the decision table (CannotLinkSelf, TargetSecondaryIdentity, TargetAlreadyLinked,
 * AlreadyLinked), attach or merge (the secondary's sessions ended), the events with their
 * deliveries, the notices and the stored result. A refusal is an outcome, not an error, so
 * the try it counted commits; a state that moved under the locks is a conflict, run again.
 * What it writes that is text (event envelopes, notices) is made here, before the call, for
 * every outcome that could need it.
 */
export async function verifyLink(deps: Deps, actor: UserActor, input: { stateId: unknown; otp: unknown }): Promise<VerifyResult> {
  const binding = linkBinding(actor);
  const check = verifyInStatement(deps, binding, input.stateId, input.otp, actor.clientAddress);
  const identifier = check && (await stateIdentifier(deps, binding, check.stateId));
  if (!check || !identifier) {
    // not a code, or no such state: the usual checks give the usual answer
    await verifyOtp(deps, binding, input.stateId, input.otp, actor.clientAddress);
    throw new OTPInvalid();
  }
  return decideLink(deps, actor, binding, check, identifier);
}

/**
 * Runs link_verify for a state whose code `check` carries, and answers its outcome: the verify
 * of a code, and of an external sign-in's one-time code (src/linking/external.ts), decide alike.
 */
export async function decideLink(deps: Deps, actor: UserActor, binding: OtpBinding, check: VerifyInStatement, identifier: Identifier): Promise<VerifyResult> {
  const row = await retryingConflicts(() => runLinkVerify(deps.db, linkVerifyArguments(actor, check, identifier)));
  switch (row.outcome) {
    case "attached":
    case "merged":
      deps.notices.kick();
      return JSON.parse(row.stored!) as VerifyResult;
    case "replay":
      return JSON.parse(row.stored!) as VerifyResult;
    case "rate_limited":
      return refuseForWrongCodes(row.retry_after ?? 1);
    case "capped":
      return refuseCapped(row.retry_after ?? 1);
    case "wrong":
      return wrongCode(deps, binding, check.stateId, identifier, row.tries ?? 0, actor.clientAddress);
    case "invalid":
      throw new OTPInvalid();
    case "gone":
      throw new Unauthenticated("this account no longer exists");
    case "ended":
      throw new Unauthenticated("this session has ended; sign in again");
    default:
      throw refusal(row.outcome);
  }
}

/** The decision table's refusals, by the name link_verify reports. */
function refusal(outcome: string): Error {
  switch (outcome) {
    case "CannotLinkSelf":
      return new CannotLinkSelf();
    case "TargetSecondaryIdentity":
      return new TargetSecondaryIdentity();
    case "TargetAlreadyLinked":
      return new TargetAlreadyLinked();
    case "AlreadyLinked":
      return new AlreadyLinked();
    default:
      return new Error(`link_verify: unknown outcome ${outcome}`);
  }
}

/** The identifier a link state was issued for (null: no such state of this account). */
async function stateIdentifier(deps: Deps, binding: { projectId: string; accountId: string; sessionId: string }, stateId: string): Promise<Identifier | null> {
  const [row] = await run(deps.db, LINK_STATE, [stateId, binding.projectId, binding.accountId, binding.sessionId]);
  return row ? { kind: row.kind as Identifier["kind"], value: row.value } : null;
}

/** link_verify's arguments: the checks, and the events and notices of both possible changes. */
function linkVerifyArguments(actor: UserActor, check: VerifyInStatement, identifier: Identifier): LinkVerifyInput {
  const { projectId, user } = actor;
  const nonce = randomBytes(12).toString("hex");
  // placeholders the statement replaces with the user object (and the secondary's id) it reads
  // after the change; random, so no value anywhere in an event can imitate them
  const userMark = `lg-user-${nonce}`;
  const secondaryMark = `lg-secondary-${nonce}`;
  const ids = [newOrderedId("evt"), newOrderedId("evt")];
  const bodies = (events: Array<[EventType, object]>) =>
    events.map(([eventType, extra], i) => envelope(ids[i], { projectId, eventType, data: { user: userMark, ...extra } }));
  const attach = attachedEvents(identifier);
  const merge: Array<[EventType, object]> = [
    ["user.merged", { secondary_user_id: secondaryMark, primary_user_id: user.accountId }],
    ["user.updated", {}],
  ];
  const now = new Date();
  const notices = [
    noticeText({ kind: "attached", identifier }, now, actor.clientAddress),
    noticeText({ kind: "merged", identifier }, now, actor.clientAddress),
    noticeText({ kind: "merged_away" }, now, actor.clientAddress),
  ];
  return {
    project: projectId,
    account: user.accountId,
    session: user.sessionId,
    state: check.stateId,
    hash: check.hash,
    max_tries: check.maxTries,
    fail_key: check.failKey,
    fail_max: check.failMax,
    fail_window: check.failWindow,
    cap_prefix: check.cap.prefix,
    cap_max: check.cap.max,
    cap_window: check.cap.windowSeconds,
    judge_places: check.cap.places,
    known_days: check.cap.knownDays,
    address_group: check.address.group,
    address_max: check.address.max,
    address_window: check.address.windowSeconds,
    identifier_id: newId("idt"),
    event_ids: ids,
    channel: DELIVERY_CHANNEL,
    user_mark: userMark,
    secondary_mark: secondaryMark,
    attach_types: attach.map(([t]) => t),
    attach_bodies: bodies(attach),
    merge_types: merge.map(([t]) => t),
    merge_bodies: bodies(merge),
    notice_subjects: notices.map((n) => n.subject),
    notice_texts: notices.map((n) => n.text),
    attached_result: JSON.stringify({ message: LINKED, outcome: "attached" }),
    merged_result: JSON.stringify({ message: LINKED, outcome: "merged" }),
  };
}

export async function removeLink(deps: Deps, actor: UserActor, input: IdentifierInput & { external?: unknown }) {
  const identifier = parseRemovable(input);
  await requireRecentAuth(deps, actor);
  await transaction(deps.prisma, async (tx) => {
    const me = await currentAccount(tx, actor);
    const row = await tx.identifier.findUnique({
      where: { projectId_kind_value: { projectId: actor.projectId, kind: identifier.kind, value: identifier.value } },
      include: { external: { select: { provenBy: true } } },
    });
    const onSecondary = !!row && me.merge_role === "primary" && row.accountId === me.merged_with_id;
    if (!row || (row.accountId !== me.id && !onSecondary)) throw new IdentifierNotLinked();
    if (onSecondary) return separate(tx, actor, me.merged_with_id!);
    if ((await signInCapableBesides(deps, tx, me, row.id)) === 0) throw new LastIdentifier();
    await endSessionsSignedInWith(tx, me.id, [row.id], actor.user.sessionId);
    await handOnProofs(tx, me.id, row.id, row.linkedWith ?? row.external?.provenBy ?? null);
    await tx.identifier.delete({ where: { id: row.id } });
    await tx.account.update({ where: { id: me.id }, data: { updatedAt: new Date() } });
    await emit(tx, actor.projectId, me.id, [
      ["user.identifier.unlinked", { identifier: { type: identifier.kind, value: identifier.value } }],
      ["user.updated", {}],
    ]);
    await announce(tx, actor, { kind: "removed", identifier }, [identifier, ...(await signInIdentifiers(tx, me.id))], [identifier]);
  });
  deps.notices.kick();
  return { message: "Account unlinked successfully" as const };
}

export async function unmerge(deps: Deps, actor: UserActor) {
  await requireRecentAuth(deps, actor);
  await transaction(deps.prisma, async (tx) => {
    const me = await currentAccount(tx, actor);
    if (me.merge_role !== "primary" || !me.merged_with_id) throw new NotMerged();
    return separate(tx, actor, me.merged_with_id);
  });
  deps.notices.kick();
  return { message: "Accounts unmerged successfully" as const };
}

/**
 * Unmerge done for the user by someone else (src/linking/support.ts): the authority is theirs,
 * not the user's session, so the user's recent-authentication check does not apply. Only the
 * pair named is separated, `accountId` and `partnerId` in either order; `record`, who did it,
 * goes into user.unmerged. Which of the two is the primary, whether they are still merged with
 * each other and whether both still exist are read under both accounts' locks (in id order, as
 * every other locker of a pair takes them): read before, the user's own unmerge and a merge the
 * other way round, or a deletion, made meanwhile answered support staff UNAUTHENTICATED, as if
 * their key had been refused (docs/graphql.md, unmergeAccount: NotFound, NotMerged).
 */
export async function unmergeOnBehalf(deps: Deps, support: KeyActor, accountId: string, partnerId: string, record: Record<string, string>) {
  const pair = await transaction(deps.prisma, async (tx) => {
    const locked = await lockAccounts(tx, support.projectId, [accountId, partnerId]);
    const account = locked.find((a) => a.id === accountId);
    const partner = locked.find((a) => a.id === partnerId);
    if (!account || !partner) throw new NotFound("no such account");
    if (account.merged_with_id !== partner.id) throw new NotMerged("these two accounts are not merged with each other");
    const [primary, secondary] = account.merge_role === "primary" ? [account, partner] : [partner, account];
    // the primary acts, as in the user's own unmerge, with no session behind it
    const actor: UserActor = { ...support, clientAddress: SUPPORT_STAFF, user: { accountId: primary.id, sessionId: "", authTime: new Date(), authAgeMs: 0 } };
    await separate(tx, actor, secondary.id, record);
    return { primaryId: primary.id, secondaryId: secondary.id };
  });
  deps.notices.kick();
  return { message: "Accounts unmerged successfully" as const, ...pair };
}

/**
 * The account's identifiers other than `removed` that can still sign in and stay: an external
 * one whose provider was deleted cannot sign in, nor a held number that a code sign-in refuses
 * now (phoneSignsIn: its numbering plan changed, or its country is no longer texted), and one
 * proven through the merged secondary is removed on unmerge (counted, removing the account's
 * own last address then unmerging left it none: 21st review).
 */
async function signInCapableBesides(deps: Deps, tx: Tx, me: LockedAccount, removed: string): Promise<number> {
  const leaving = await leavingOnUnmerge(tx, me);
  const rest = await tx.identifier.findMany({
    where: { accountId: me.id, id: { notIn: [removed, ...leaving] }, OR: [{ kind: { not: "external" } }, { external: { providerId: { not: null } } }] },
    select: { kind: true, value: true },
  });
  return rest.filter((i) => i.kind !== "phone" || phoneSignsIn(i.value, deps.config.smsCountries)).length;
}

/** The identifiers of a primary that an unmerge would remove (none for any other account). */
export async function leavingOnUnmerge(tx: Tx, account: Pick<LockedAccount, "id" | "merge_role" | "merged_with_id">): Promise<Set<string>> {
  if (account.merge_role !== "primary" || !account.merged_with_id) return new Set();
  const { identifiers } = await provenThroughSecondary(tx, account.id, account.merged_with_id);
  return new Set(identifiers.map((i) => i.id));
}

async function separate(tx: Tx, actor: UserActor, secondaryId: string, record: Record<string, string> = {}): Promise<void> {
  const { projectId, user } = actor;
  await lockAccounts(tx, projectId, [user.accountId, secondaryId]);
  const { identifiers, passkeys, proofs } = await provenThroughSecondary(tx, user.accountId, secondaryId);
  // the primary's remembered app consents go too: a sign-in with the secondary's address landed
  // here while the two were merged, so the other person may have given them, and an app would
  // then skip the consent page for this account (twenty-third review); each app asks again, and
  // what the third-party apps hold for the account on their strength ends. Before any session
  // ends: a client's deletion takes its consents, then its grants' sessions, and an unmerge that
  // ended an app's session first and then waited for its consent deadlocked with it until
  // Postgres broke it after deadlock_timeout (test/security.unmerge-app-grants.test.ts).
  await withdrawConsentsOnUnmerge(tx, projectId, user.accountId);
  // the sessions they opened on the primary end, the one making this change too. Kept, it would
  // stay on an account it holds no proof for: an intruder's session that unmerged, or the owner's
  // on the account she just left (seventeenth review).
  await endSessionsSignedInWith(tx, user.accountId, proofs);
  // What was added on the primary by way of the secondary is removed, not handed to it: the
  // secondary comes back exactly as it was, and nothing moves between accounts (docs/security.md,
  // "Sessions"). Left on the primary, it would keep whoever held the secondary's address in.
  if (identifiers.length) await tx.identifier.deleteMany({ where: { accountId: user.accountId, id: { in: identifiers.map((i) => i.id) } } });
  if (passkeys.length) await tx.passkey.deleteMany({ where: { accountId: user.accountId, id: { in: passkeys } } });
  await clearMerge(tx, user.accountId, secondaryId);
  const pair = { secondary_user_id: secondaryId, primary_user_id: user.accountId };
  // a receiver that follows identifiers and passkeys by their events learns that those left the
  // primary: each passkey as removePasskey announces one (src/auth/passkeys.ts), or it kept a
  // passkey the unmerge had removed (docs/events.md)
  const left = identifiers.map((i): [EventType, object] => ["user.identifier.unlinked", { identifier: { type: i.kind, value: i.value } }]);
  const removed = passkeys.map((id): [EventType, object] => ["user.updated", { passkey_removed: { id } }]);
  await emit(tx, projectId, user.accountId, [["user.unmerged", { ...pair, ...record }], ...left, ...removed, ["user.updated", {}]]);
  // the removed addresses are told as the secondary's are: without the client address
  const leaving = [...(await identifiersOf(tx, secondaryId)), ...identifiers];
  await announce(tx, actor, { kind: "unmerged", secondaryId }, [...(await identifiersOf(tx, user.accountId)), ...leaving], leaving);
}

/** The primary's events of one change: its user object is read once, all events written in one statement. */
async function emit(tx: Tx, projectId: string, accountId: string, events: Array<[EventType, object]>) {
  const { user } = await userEventData(tx, projectId, accountId);
  await enqueueAll(tx, events.map(([eventType, extra]) => ({ projectId, eventType, data: { user, ...extra } })));
}
