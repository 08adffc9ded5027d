// The dashboard's users view, for a project's support staff (secret key only): find an
// account, read its recent events, end its sessions. Every statement has the project in its
// WHERE clause: another project's account is not found, exactly like no account.
import { heldPhone, normalizeEmail, type Identifier } from "../auth/identifiers.ts";
import type { Database } from "../db/client.ts";
import type { Deps, KeyActor } from "../deps.ts";
import { IdentifierRequired, InvalidRequest, NotFound } from "../errors.ts";
import { isIdShaped } from "../ids.ts";
import { liveSessionWhere } from "../auth/sessions.ts";

type DbLike = Pick<Database, "prisma">;

export type AccountQuery = { email?: string | null; phone?: string | null; accountId?: string | null };

/** Exactly one of e-mail, phone and account id: an identifier normalized as sign-in does, or an id. */
export function parseAccountQuery(q: AccountQuery): Identifier | { id: string } {
  const given = (["email", "phone", "accountId"] as const).filter((k) => q[k] != null && q[k] !== "");
  if (given.length === 0) throw new IdentifierRequired("give an e-mail address, a phone number or an account id");
  if (given.length > 1) throw new InvalidRequest("give only one of email, phone and accountId");
  if (q.email) return { kind: "email", value: normalizeEmail(q.email) };
  if (q.phone) return { kind: "phone", value: heldPhone(q.phone) };
  return { id: q.accountId!.trim() };
}

/** The id of the project's account holding the identifier or with that id; null when none. */
export async function findAccountId(db: DbLike, projectId: string, q: AccountQuery): Promise<string | null> {
  const key = parseAccountQuery(q);
  if ("id" in key) return accountWithId(db, projectId, key.id);
  const held = await db.prisma.identifier.findUnique({
    where: { projectId_kind_value: { projectId, kind: key.kind, value: key.value } },
    select: { accountId: true },
  });
  return held?.accountId ?? null;
}

async function accountWithId(db: DbLike, projectId: string, id: string): Promise<string | null> {
  if (!isIdShaped(id, "acc")) return null;
  const account = await db.prisma.account.findFirst({ where: { id, projectId }, select: { id: true } });
  return account?.id ?? null;
}

export const MAX_RECENT_EVENTS = 50;
export const DEFAULT_RECENT_EVENTS = 20;
/** The most live sessions the support view lists of an account, newest first. */
export const SESSIONS_LISTED = 50;
/**
 * The most passkeys the support view lists of an account, oldest first: an account registers at
 * most 20 (src/auth/passkeys.ts PASSKEYS_PER_ACCOUNT), but can hold more from before that cap.
 */
export const PASSKEYS_LISTED = 50;

/**
 * The ids of the account's `first` most recent events, newest first: those about it (its user
 * object, or its id in a security event) and the merges and unmerges it was the secondary of.
 * Read through the two partial indexes of migration 20261123091300_console_rollups (on the
 * functions of src/webhooks/event-accounts.sql), newest first, `first` rows each.
 */
export async function recentEventIds(db: DbLike, projectId: string, accountId: string, first?: number | null): Promise<string[]> {
  const limit = first ?? DEFAULT_RECENT_EVENTS;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_RECENT_EVENTS) throw new InvalidRequest(`first must be between 1 and ${MAX_RECENT_EVENTS}`);
  const rows = await db.prisma.$queryRaw<{ id: string }[]>`
    SELECT id FROM (
      (SELECT id, seq FROM outbox_events
       WHERE project_id = ${projectId} AND NOT test AND dashboard.event_account(body) = ${accountId}
       ORDER BY seq DESC LIMIT ${limit}::int)
      UNION ALL
      (SELECT id, seq FROM outbox_events
       WHERE project_id = ${projectId} AND NOT test AND event_type IN ('user.merged', 'user.unmerged')
         AND dashboard.event_secondary_account(body) = ${accountId}
       ORDER BY seq DESC LIMIT ${limit}::int)
    ) e
    ORDER BY seq DESC LIMIT ${limit}::int`;
  return rows.map((r) => r.id);
}

/**
 * Ends every live session of the project's account (its tokens fail from their next request);
 * returns how many ended. An id that names no account of the project (another project's, a
 * blank one) is NotFound.
 */
export async function endAccountSessions(deps: Deps, support: KeyActor, accountId: string): Promise<number> {
  const id = await accountWithId(deps, support.projectId, accountId.trim());
  if (!id) throw new NotFound("no such account");
  const { count } = await deps.prisma.session.updateMany({
    where: { ...liveSessionWhere(), accountId: id, projectId: support.projectId },
    data: { endedAt: new Date() },
  });
  deps.logger.info({ projectId: support.projectId, accountId: id, ended: count, by: "support", api_key_id: support.apiKeyId }, "sessions ended by support");
  return count;
}
