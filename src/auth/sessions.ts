// Sessions live in the database so ending one (sign-out, merge) takes effect on the next call.
import type { Db, Tx } from "../db/client.ts";
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

export async function assertLiveSession(db: Db, projectId: string, sessionId: string, accountId: string): Promise<void> {
  const live = await db.session.count({
    // A merged secondary never acts, even through a session that slipped past the merge.
    where: { id: sessionId, projectId, accountId, endedAt: null, expiresAt: { gt: new Date() }, account: { OR: [{ mergeRole: null }, { mergeRole: "primary" }] } },
  });
  if (!live) throw new Unauthenticated("this session has ended; sign in again");
}
