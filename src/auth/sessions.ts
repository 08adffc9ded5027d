// Sessions live in the database so ending one (sign-out, merge) takes effect on the next call.
import type { Db, Tx } from "../db/client.ts";
import { Prisma } from "../generated/prisma/client.ts";
import { Unauthenticated } from "../errors.ts";
import { newId } from "../ids.ts";

const SESSION_TTL_MS = 30 * 24 * 3600 * 1000;

export async function createSession(tx: Tx, projectId: string, accountId: string): Promise<string> {
  const id = newId("ses");
  await tx.session.create({ data: { id, projectId, accountId, expiresAt: new Date(Date.now() + SESSION_TTL_MS) } });
  return id;
}

export async function endSessions(tx: Db | Tx, where: { accountId: string } | { id: string }): Promise<void> {
  await tx.session.updateMany({ where: { ...where, endedAt: null }, data: { endedAt: new Date() } });
}

/**
 * The one definition of a live session, as an SQL condition: not ended, not expired, of this
 * account and project, and the account is not a merged secondary (a secondary never acts,
 * even through a session that slipped past the merge). `project` is an SQL expression so
 * callers can check it in the same statement as the API key.
 */
export function liveSessionSql(sessionId: string, accountId: string, project: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`EXISTS (
    SELECT 1 FROM sessions s JOIN accounts a ON a.id = s.account_id
    WHERE s.id = ${sessionId} AND s.account_id = ${accountId} AND s.project_id = ${project}
      AND s.ended_at IS NULL AND s.expires_at > now() AND a.merge_role IS DISTINCT FROM 'secondary')`;
}

export async function assertLiveSession(db: Db, projectId: string, sessionId: string, accountId: string): Promise<void> {
  const [row] = await db.$queryRaw<{ live: boolean }[]>`SELECT ${liveSessionSql(sessionId, accountId, Prisma.sql`${projectId}`)} AS live`;
  if (!row?.live) throw new Unauthenticated(ENDED);
}

export const ENDED = "this session has ended; sign in again";
