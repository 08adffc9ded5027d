// Identifier linking (CONTRACT section 3): request, verify (attach or merge, decided here
// alone), remove and unmerge. GraphQL and REST both call these functions; no rule lives
// anywhere else.
import type { Deps, UserActor } from "../deps.ts";
import type { Tx } from "../db/client.ts";
import { transaction } from "../db/transaction.ts";
import { enqueueAll } from "../delivery/outbox.ts";
import type { EventType } from "../webhooks/event-types.ts";
import {
  AlreadyLinked,
  CannotLinkSelf,
  IdentifierNotLinked,
  LastIdentifier,
  NotMerged,
  OTPInvalid,
  TargetAlreadyLinked,
  TargetSecondaryIdentity,
  Unauthenticated,
} from "../errors.ts";
import { newId } from "../ids.ts";
import { parseIdentifier, type Identifier } from "../auth/identifiers.ts";
import { consumeOtp, storedResult, storeResult } from "../auth/otp.ts";
import { sendOtp, verifyOtp } from "../auth/otp-flow.ts";
import { endSessions } from "../auth/sessions.ts";
import { userEventData } from "../auth/accounts.ts";
import { announce, identifiersOf, others, signInIdentifiers } from "../auth/change-notices.ts";
import { requireRecentAuth } from "../auth/recent-auth.ts";
import { lockAccounts, type LockedAccount } from "../db/locks.ts";
import { markMerged, clearMerge, MergeConflict } from "./sql.ts";

export type LinkOutcome = "attached" | "merged";
export type VerifyResult = { message: "Account linked successfully"; outcome: LinkOutcome };

type IdentifierInput = { email?: unknown; phone?: unknown };

/** The signed-in account read under a row lock. */
async function currentAccount(tx: Tx, actor: UserActor) {
  const [me] = await lockAccounts(tx, [actor.user.accountId]);
  return checkedCurrent(me, actor);
}

/**
 * The caller authenticated before taking the lock: its account may have been deleted or
 * merged away as a secondary since (a merge ends the secondary's sessions in the same
 * transaction). A secondary never acts, so it is answered like any ended session.
 */
function checkedCurrent(me: LockedAccount | undefined, actor: UserActor): LockedAccount {
  if (!me || me.project_id !== actor.projectId) throw new Unauthenticated("this account no longer exists");
  if (me.merge_role === "secondary") throw new Unauthenticated("this session has ended; sign in again");
  return me;
}

export async function requestLink(deps: Deps, actor: UserActor, input: IdentifierInput): Promise<{ stateId: string }> {
  const identifier = parseIdentifier(input);
  // Checked when the link starts; the verify of a state issued now needs no fresh check.
  await requireRecentAuth(deps, actor);
  const own = await deps.prisma.identifier.findFirst({
    where: {
      projectId: actor.projectId,
      kind: identifier.kind,
      value: identifier.value,
      account: { OR: [{ id: actor.user.accountId }, { mergedWithId: actor.user.accountId, mergeRole: "secondary" }] },
    },
    select: { id: true },
  });
  // Only what the caller already knows is checked here; who else holds the identifier is
  // decided at verify, after the code proved ownership, so this answer reveals nothing.
  if (own) throw new CannotLinkSelf();
  const binding = { projectId: actor.projectId, accountId: actor.user.accountId, purpose: "link" as const };
  return sendOtp(deps, binding, identifier, "Confirm the address you are adding", actor.clientAddress);
}

export async function verifyLink(deps: Deps, actor: UserActor, input: { stateId: unknown; otp: unknown }): Promise<VerifyResult> {
  const binding = { projectId: actor.projectId, accountId: actor.user.accountId, purpose: "link" as const };
  const checked = await verifyOtp(deps, binding, input.stateId, input.otp, actor.clientAddress);
  if (checked.result) return checked.result as VerifyResult;
  const stateId = input.stateId as string;
  const result = await transaction(deps.prisma, async (tx) => {
    // Consuming first: a concurrent verify of the same state waits on its row lock and then
    // returns the stored result instead of deciding twice.
    if (!(await consumeOtp(tx, stateId))) {
      const done = await storedResult(tx, stateId);
      if (done == null) throw new OTPInvalid();
      return done as VerifyResult;
    }
    const decided = await decide(deps, tx, actor, checked.identifier);
    await storeResult(tx, stateId, decided);
    return decided;
  });
  deps.notices.kick();
  return result;
}

async function decide(deps: Deps, tx: Tx, actor: UserActor, identifier: Identifier) {
  const where = { projectId_kind_value: { projectId: actor.projectId, kind: identifier.kind, value: identifier.value } };
  const seen = await tx.identifier.findUnique({ where, select: { accountId: true } });
  // The current account and the holder's are locked together, in id order (two accounts
  // merging each other cannot deadlock), and the holder is read again under the locks: an
  // account's identifiers only change while its row is locked, so this read is the truth.
  const ids = [actor.user.accountId, ...(seen && seen.accountId !== actor.user.accountId ? [seen.accountId] : [])];
  const locked = await lockAccounts(tx, ids);
  const me = checkedCurrent(locked.find((r) => r.id === actor.user.accountId), actor);
  const holder = await tx.identifier.findUnique({ where });
  if ((holder?.accountId ?? null) !== (seen?.accountId ?? null)) throw new MergeConflict("the identifier moved; deciding again");
  if (holder && (holder.accountId === me.id || holder.accountId === me.merged_with_id)) throw new CannotLinkSelf();
  if (!holder) return attach(tx, actor, identifier);
  if (holder.origin === "attached") throw new TargetSecondaryIdentity();
  const other = locked.find((r) => r.id === holder.accountId);
  if (!other) throw new MergeConflict("the identifier's account is gone; deciding again");
  if (other.merge_role) throw new TargetAlreadyLinked();
  if (me.merge_role) throw new AlreadyLinked();
  return merge(tx, actor, other.id, identifier);
}

async function attach(tx: Tx, actor: UserActor, identifier: Identifier) {
  const { projectId, user } = actor;
  // The unique index on (project, kind, value) is the arbiter: of two accounts attaching the
  // same identifier at once, the second insert fails and its retry sees the first's row.
  await tx.identifier.create({
    data: { id: newId("idt"), projectId, accountId: user.accountId, kind: identifier.kind, value: identifier.value, origin: "attached" },
  });
  await tx.account.update({ where: { id: user.accountId }, data: { updatedAt: new Date() } });
  await emit(tx, projectId, user.accountId, [
    ["user.identifier.linked", { identifier: { type: identifier.kind, value: identifier.value } }],
    ["user.updated", {}],
  ]);
  // everyone who signs in here but the new identifier: whoever added it already knows
  await announce(tx, actor, { kind: "attached", identifier }, others(await signInIdentifiers(tx, user.accountId), identifier));
  return { message: "Account linked successfully" as const, outcome: "attached" as const };
}

async function merge(tx: Tx, actor: UserActor, secondaryId: string, identifier: Identifier) {
  const { projectId, user } = actor;
  await markMerged(tx, user.accountId, secondaryId);
  await endSessions(tx, { accountId: secondaryId });
  const pair = { secondary_user_id: secondaryId, primary_user_id: user.accountId };
  await emit(tx, projectId, user.accountId, [["user.merged", pair], ["user.updated", {}]]);
  await announce(tx, actor, { kind: "merged", identifier }, await identifiersOf(tx, user.accountId));
  await announce(tx, actor, { kind: "merged_away" }, await identifiersOf(tx, secondaryId));
  return { message: "Account linked successfully" as const, outcome: "merged" as const };
}

export async function removeLink(deps: Deps, actor: UserActor, input: IdentifierInput) {
  const identifier = parseIdentifier(input);
  await requireRecentAuth(deps, actor);
  await transaction(deps.prisma, async (tx) => {
    const me = await currentAccount(tx, actor);
    const row = await tx.identifier.findUnique({
      where: { projectId_kind_value: { projectId: actor.projectId, kind: identifier.kind, value: identifier.value } },
    });
    const onSecondary = !!row && me.merge_role === "primary" && row.accountId === me.merged_with_id;
    if (!row || (row.accountId !== me.id && !onSecondary)) throw new IdentifierNotLinked();
    if (onSecondary) return separate(tx, actor, me.merged_with_id!);
    if ((await tx.identifier.count({ where: { accountId: me.id } })) <= 1) throw new LastIdentifier();
    await tx.identifier.delete({ where: { id: row.id } });
    await tx.account.update({ where: { id: me.id }, data: { updatedAt: new Date() } });
    await emit(tx, actor.projectId, me.id, [
      ["user.identifier.unlinked", { identifier: { type: identifier.kind, value: identifier.value } }],
      ["user.updated", {}],
    ]);
    await announce(tx, actor, { kind: "removed", identifier }, [identifier, ...(await signInIdentifiers(tx, me.id))]);
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
 * pair named (`actor`'s account the primary, `secondaryId` its secondary) is separated;
 * `record`, who did it, goes into user.unmerged.
 */
export async function unmergeOnBehalf(deps: Deps, actor: UserActor, secondaryId: string, record: Record<string, string>) {
  await transaction(deps.prisma, async (tx) => {
    const me = await currentAccount(tx, actor);
    if (me.merge_role !== "primary" || me.merged_with_id !== secondaryId) throw new NotMerged("these two accounts are not merged with each other");
    return separate(tx, actor, secondaryId, record);
  });
  deps.notices.kick();
  return { message: "Accounts unmerged successfully" as const };
}

async function separate(tx: Tx, actor: UserActor, secondaryId: string, record: Record<string, string> = {}): Promise<void> {
  const { projectId, user } = actor;
  await lockAccounts(tx, [user.accountId, secondaryId]);
  await clearMerge(tx, user.accountId, secondaryId);
  const pair = { secondary_user_id: secondaryId, primary_user_id: user.accountId };
  await emit(tx, projectId, user.accountId, [["user.unmerged", { ...pair, ...record }], ["user.updated", {}]]);
  await announce(tx, actor, { kind: "unmerged", secondaryId }, [...(await identifiersOf(tx, user.accountId)), ...(await identifiersOf(tx, secondaryId))]);
}

/** The primary's events of one change: its user object is read once, all events written in one statement. */
async function emit(tx: Tx, projectId: string, accountId: string, events: Array<[EventType, object]>) {
  const { user } = await userEventData(tx, projectId, accountId);
  await enqueueAll(tx, events.map(([eventType, extra]) => ({ projectId, eventType, data: { user, ...extra } })));
}
