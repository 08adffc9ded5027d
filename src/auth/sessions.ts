// Sessions live in the database so ending one (sign-out, merge, "end other sessions") takes
// effect on the next call of every token issued for it.
import type { Db, Tx } from "../db/client.ts";
import { Prisma } from "../generated/prisma/client.ts";
import { NotFound, Unauthenticated } from "../errors.ts";
import { newId } from "../ids.ts";
import { withHoles } from "../db/fast.ts";
import { lockAccounts, type LockedAccount } from "../db/locks.ts";
import type { Deps, UserActor } from "../deps.ts";
import { requireRecentAuth } from "./recent-auth.ts";
import { transaction } from "../db/transaction.ts";

export const SESSION_TTL_MS = 30 * 24 * 3600 * 1000;

/** `fed`: an external identity provider (docs/external-identities.md) */
export type AuthMethod = "otp" | "passkey" | "fed";
/** Where a sign-in came from, kept on the session for the user's list of sessions. */
export type SessionOrigin = { clientAddress?: string; userAgent?: string };

/**
 * `signedInWith`: the id of what the sign-in proved (an identifier, external ones included, or a
 * passkey); when that leaves the account the session ends (src/linking/service.ts, passkeys.ts).
 */
export async function createSession(tx: Tx, projectId: string, accountId: string, method: AuthMethod, origin: SessionOrigin = {}, signedInWith?: string): Promise<string> {
  const id = newId("ses");
  // Dated by the database's now(), as a code sign-in dates its session (src/auth/sign-in.sql):
  // Prisma fills a default now() with this gateway's clock, so a passkey or external sign-in on
  // a gateway running ahead was recent, and lived, that much longer on every gateway
  // (docs/operations.md, "Clocks").
  await tx.$executeRaw`
    INSERT INTO sessions (id, project_id, account_id, auth_method, created_at, auth_time, expires_at, client_address, user_agent, signed_in_with)
    VALUES (${id}, ${projectId}, ${accountId}, ${method}, now() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC',
            (now() + make_interval(secs => ${SESSION_TTL_MS / 1000}::int)) AT TIME ZONE 'UTC',
            ${origin.clientAddress?.slice(0, 64) ?? null}, ${origin.userAgent?.slice(0, 512) ?? null}, ${signedInWith ?? null})`;
  return id;
}

/**
 * Ends the account's sessions that a sign-in with one of `proofIds` (identifiers or passkeys)
 * opened, except `keep` when given (the session removing its own proof, which just proved a
 * recent sign-in; an unmerge keeps none: src/linking/service.ts). Without this, whoever held a
 * recent session could attach an address or register a passkey of their own, sign in with it,
 * and keep that session after the owner removed it or unmerged (docs/security.md, "Stolen
 * sessions").
 */
export async function endSessionsSignedInWith(tx: Tx, accountId: string, proofIds: string[], keep?: string): Promise<void> {
  if (proofIds.length === 0) return;
  await tx.session.updateMany({
    // a re-authentication with it counts as much as a sign-in: its recent sign-in came from it
    where: { accountId, OR: [{ signedInWith: { in: proofIds } }, { reauthenticatedWith: { in: proofIds } }], endedAt: null, ...(keep ? { id: { not: keep } } : {}) },
    data: { endedAt: new Date() },
  });
}

export async function endSessions(tx: Db | Tx, where: { accountId: string } | { id: string }): Promise<void> {
  await tx.session.updateMany({ where: { ...where, endedAt: null }, data: { endedAt: new Date() } });
}

/**
 * The one definition of a live session, as an SQL condition on `s` (sessions) and `a` (its
 * account): not ended, not expired, of this account and project, and the account is not a
 * merged secondary (a secondary never acts, even through a session that slipped past the
 * merge). Its arguments are SQL expressions (parameters, columns), so callers can check the
 * project in the same statement as the API key; the fast path (authenticateUser,
 * authenticateToken), Prisma's queries (liveSessionSql) and lockForSession use this text;
 * src/auth/sign-in.sql spells it out for a retried verify, and src/linking/link-verify.sql for the
 * acting session under the account's lock: change them with it.
 */
export function liveSessionCondition(session: string, account: string, project: string): string {
  return `s.id = ${session} AND s.account_id = ${account} AND s.project_id = ${project}
      AND s.ended_at IS NULL AND s.expires_at > now() AND a.merge_role IS DISTINCT FROM 'secondary'`;
}

/**
 * Touches last_used_at at most once a minute, only when the request's API key (by its hash) is
 * of the session's project: an UPDATE for a data-modifying CTE, so authenticating stays one
 * round trip and most calls write nothing. Its one caller (authenticate_user) commits it
 * without waiting for the disk; inside a larger transaction it would commit with that.
 */
export function touchSessionStatement(session: string, keyHash: string): string {
  return `UPDATE sessions SET last_used_at = now()
    WHERE id = ${session} AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')
      AND EXISTS (SELECT 1 FROM api_keys k WHERE k.key_hash = ${keyHash} AND k.revoked_at IS NULL AND k.project_id = sessions.project_id)`;
}

export function liveSessionSql(sessionId: string, accountId: string, project: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`EXISTS (SELECT 1 FROM sessions s JOIN accounts a ON a.id = s.account_id WHERE ${liveSessionOf(sessionId, accountId, project)})`;
}

/** liveSessionCondition for one session of an account of a project, with its values bound. */
function liveSessionOf(sessionId: string, accountId: string, project: string | Prisma.Sql): Prisma.Sql {
  return withHoles(liveSessionCondition("\0", "\0", "\0"), sessionId, accountId, project);
}

/**
 * The sessions a list of an account's sessions shows as live, as a Prisma `where`: neither ended
 * nor expired (liveSessionCondition's own test of a session; its account is the list's). Expired
 * by this gateway's clock, as Prisma cannot say now(): it decides only what a list shows, and
 * liveSessionCondition, on the database's clock, what a session may do (docs/operations.md, "Clocks").
 */
export function liveSessionWhere(): Prisma.SessionWhereInput {
  return { endedAt: null, expiresAt: { gt: new Date() } };
}

/**
 * What a change made with a session does first: the acting account row-locked, then the session
 * checked live under that lock. A merge, removal or sign-out on another gateway may have ended
 * the session after the request was authenticated, and a change queued behind it must find so
 * (24th and 26th reviews: an intruder's late link verify, passkey, rename or deletion). Returns
 * the account's row and what the session proved last (its re-authentication, else its sign-in).
 */
export async function lockForSession(tx: Tx, actor: UserActor): Promise<{ account: LockedAccount; lastProof: string | null }> {
  const { projectId, user } = actor;
  const [account] = await lockAccounts(tx, projectId, [user.accountId]);
  const condition = liveSessionOf(user.sessionId, user.accountId, projectId);
  const [live] = await tx.$queryRaw<{ proof: string | null }[]>`
    SELECT coalesce(s.reauthenticated_with, s.signed_in_with) AS proof FROM sessions s JOIN accounts a ON a.id = s.account_id WHERE ${condition}`;
  if (!account || !live) throw new Unauthenticated(ENDED);
  return { account, lastProof: live.proof };
}

export async function assertLiveSession(db: Db | Tx, projectId: string, sessionId: string, accountId: string): Promise<void> {
  const [row] = await db.$queryRaw<{ live: boolean }[]>`SELECT ${liveSessionSql(sessionId, accountId, Prisma.sql`${projectId}`)} AS live`;
  if (!row?.live) throw new Unauthenticated(ENDED);
}

export const ENDED = "this session has ended; sign in again";

/**
 * A re-authentication moves the session's auth_time; its id (and every token's sid) stays.
 * `proofId`: the identifier or passkey it proved, which ends the session when it leaves the account.
 * Only a live session moves (liveSessionCondition): one that a sign-out, "end other sessions", a
 * merge or a removal ended while the proof was being checked is a change made with an ended
 * session, which writes nothing (docs/security.md, "Stolen sessions"). Matched by id alone, it
 * was re-authenticated all the same and answered fresh tokens, as if it lived.
 */
export async function markReauthenticated(tx: Db | Tx, actor: UserActor, method: AuthMethod, proofId: string): Promise<Date> {
  const { projectId, user } = actor;
  const condition = liveSessionOf(user.sessionId, user.accountId, projectId);
  // The database's now(), as a sign-in writes it (src/auth/sign-in.sql): the gateway's own clock
  // dated a re-authentication on a gateway running ahead into the future, recent that much longer
  // on every gateway (docs/operations.md, "Clocks").
  const [s] = await tx.$queryRaw<{ auth_time: Date }[]>`
    UPDATE sessions s SET auth_time = now() AT TIME ZONE 'UTC', auth_method = ${method}, reauthenticated_with = ${proofId}
    FROM accounts a WHERE a.id = s.account_id AND ${condition} RETURNING s.auth_time`;
  if (!s) throw new Unauthenticated(ENDED);
  return s.auth_time;
}

type Owner = { projectId: string; accountId: string };

/**
 * The signed-in user ends one of their sessions. The current one may always end itself (signing
 * out must never need a fresh sign-in); ending another needs a recent authentication, or a
 * stolen, stale token could sign the owner out everywhere (docs/security.md).
 */
export async function endSessionOf(deps: Deps, actor: UserActor, sessionId: string): Promise<{ ended: number }> {
  if (sessionId !== actor.user.sessionId) await requireRecentAuth(deps, actor);
  await transaction(deps.prisma, async (tx) => {
    // the acting session checked live under the account's lock first, as every change made with
    // a session is (lockForSession): one ended meanwhile (the owner ending the other sessions on
    // another device) ended the owner's own session after it had lost (docs/security.md,
    // "Stolen sessions")
    await lockForSession(tx, actor);
    await endOwnSession(tx, ownerOf(actor), sessionId);
  });
  return { ended: 1 };
}

/** Ends every other session of the signed-in user; needs a recent authentication (endSessionOf). */
export async function endOtherSessionsOf(deps: Deps, actor: UserActor): Promise<{ ended: number }> {
  await requireRecentAuth(deps, actor);
  const ended = await transaction(deps.prisma, async (tx) => {
    // as endSessionOf: a session ended meanwhile ends nothing (docs/security.md, "Stolen sessions")
    await lockForSession(tx, actor);
    return endOtherSessions(tx, ownerOf(actor), actor.user.sessionId);
  });
  return { ended };
}

const ownerOf = (actor: UserActor): Owner => ({ projectId: actor.projectId, accountId: actor.user.accountId });

/**
 * Ends one of the account's own live sessions; another account's is simply not found, and so is
 * one that expired (docs/authentication.md, "Sessions": NotFound for a session that is not one of
 * the account's live sessions, the ones viewer.sessions lists). An expired session's tokens were
 * already refused: "ending" it answered `ended: 1` for nothing.
 */
export async function endOwnSession(db: Db | Tx, owner: Owner, sessionId: string): Promise<void> {
  const { count } = await db.session.updateMany({ where: { id: sessionId, ...owner, ...liveSessionWhere() }, data: { endedAt: new Date() } });
  if (!count) throw new NotFound("no such session");
}

/** Ends every live session of the account but `keep`; returns how many ended (expired ones are not counted: they had ended by themselves). */
export async function endOtherSessions(db: Db | Tx, owner: Owner, keep: string): Promise<number> {
  const { count } = await db.session.updateMany({ where: { ...owner, ...liveSessionWhere(), id: { not: keep } }, data: { endedAt: new Date() } });
  return count;
}
