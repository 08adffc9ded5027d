// oidc-provider's storage over the project's database (one table, oidc_payloads). Rows are keyed
// by SHA-256 of kind and id and the payload never holds the id (`jti`): a copy of the table holds
// no usable code or refresh token. A Grant belongs to a linkgate session (sessions row): it is
// found only while that session is live, so signing out, a merge, or any other end of the session
// ends its refresh tokens too, and destroying a grant (revocation, logout, a replayed code or
// refresh token) ends the session, and with it every access token carrying its `sid`.
import type { Adapter, AdapterPayload } from "oidc-provider";
import type { Deps } from "../deps.ts";
import { sha256Hex } from "../crypto.ts";
import { transaction } from "../db/transaction.ts";
import type { Tx } from "../db/client.ts";
import { enqueue } from "../webhooks/outbox.ts";
import { Prisma } from "../generated/prisma/client.ts";
import { liveSessionSql, endSessions } from "../auth/sessions.ts";
import { findByClientId } from "./clients.ts";
import { clientMetadata } from "./client-metadata.ts";
import { oidcRequest } from "./request-context.ts";
import { isStorableText, unstorableTextPath } from "../text.ts";

const rowId = (kind: string, id: string) => sha256Hex(`${kind}:${id}`);
const epoch = (d: Date) => Math.floor(d.getTime() / 1000);

/**
 * A stored code, token, grant or interaction expires `expiresIn` seconds after it was saved by the
 * database's clock, and is found only before that by the same clock. oidc-provider also checks the
 * `exp` it put in the payload against the serving process's clock, which linkgate cannot move: with
 * the row's expiry on each gateway's clock too, one running behind took an authorization code for
 * as long again as it was behind (60 s became 3 minutes at 2 minutes behind). The database's
 * expiry bounds every row to its lifetime, whatever either gateway's clock says; a gateway whose
 * clock runs ahead can still end one early by its own check (docs/operations.md, "Clocks").
 */
const expiresAtIn = (expiresIn: number) =>
  expiresIn ? Prisma.sql`(now() + make_interval(secs => ${expiresIn}::float8)) AT TIME ZONE 'UTC'` : Prisma.sql`NULL::timestamp`;
const LIVE = Prisma.sql`(expires_at IS NULL OR expires_at > now())`;

export function adapterFor(deps: Deps) {
  return class DatabaseAdapter implements Adapter {
    constructor(readonly kind: string) {}

    async upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void> {
      const { jti: _jti, ...rest } = payload;
      // What a request says is stored as sent (an authorization's state, nonce, login_hint,
      // ui_locales; a logout's state): a NUL there (`state=%00`) made Postgres refuse the row,
      // a 500 for anyone's link. Refused as the request's own error instead: oidc-provider sends
      // it to the client's redirect URI, or shows its error page (docs/oidc.md, "Errors").
      const unstorable = unstorableTextPath(rest);
      if (unstorable !== undefined) {
        const { errors } = await import("oidc-provider");
        throw new errors.InvalidRequest(`${unstorable.split(".").pop() || "a parameter"} contains a character that cannot be accepted`);
      }
      const key = rowId(this.kind, id);
      await deps.prisma.$executeRaw`
        INSERT INTO oidc_payloads (id, kind, payload, grant_id, uid, expires_at)
        VALUES (${key}, ${this.kind}, ${JSON.stringify(rest)}::jsonb, ${payload.grantId ?? null}, ${payload.uid ?? null}, ${expiresAtIn(expiresIn)})
        ON CONFLICT (id) DO UPDATE SET payload = EXCLUDED.payload, grant_id = EXCLUDED.grant_id, uid = EXCLUDED.uid, expires_at = EXCLUDED.expires_at`;
    }

    async find(id: string): Promise<AdapterPayload | undefined> {
      // a client_id or token from the request, as sent: one no row can hold is simply not found
      // (a NUL in client_id made Postgres refuse the lookup, a 500 on four endpoints)
      if (!isStorableText(id)) return undefined;
      if (this.kind === "Client") {
        const client = await findByClientId(deps, id);
        return client ? clientMetadata(client) : undefined;
      }
      const [row] = await deps.prisma.$queryRaw<{ payload: AdapterPayload; session_id: string | null; consumed_at: Date | null }[]>`
        SELECT payload, session_id, consumed_at FROM oidc_payloads WHERE id = ${rowId(this.kind, id)} AND ${LIVE}`;
      if (!row) return undefined;
      const payload = row.payload;
      if (this.kind === "Grant" && !(await sessionLive(deps, row.session_id, payload.accountId))) return undefined;
      return { ...payload, jti: id, ...(row.consumed_at ? { consumed: epoch(row.consumed_at) } : {}) };
    }

    async findByUid(uid: string): Promise<AdapterPayload | undefined> {
      if (!isStorableText(uid)) return undefined;
      const [row] = await deps.prisma.$queryRaw<{ payload: AdapterPayload }[]>`
        SELECT payload FROM oidc_payloads WHERE kind = ${this.kind} AND uid = ${uid} AND ${LIVE} LIMIT 1`;
      // Found by uid only to check that a session still exists and whose it is: its id (the
      // cookie's value) is not stored and not needed for that.
      return row?.payload;
    }

    async findByUserCode(): Promise<AdapterPayload | undefined> {
      return undefined; // no device flow
    }

    /**
     * Single use across processes (docs/oidc.md, "Tokens"): oidc-provider checks `consumed` on
     * what it found and then calls this, so two presentations at once both pass its check. One
     * conditional UPDATE decides: the row lock makes every other process wait for the winner and
     * then find the row used. A loser is a replay like any other: the grant is revoked (ending
     * the winner's tokens and session, and telling the project) and the request is invalid_grant.
     */
    async consume(id: string): Promise<void> {
      const key = rowId(this.kind, id);
      const won = await deps.prisma.$executeRaw`UPDATE oidc_payloads SET consumed_at = now() AT TIME ZONE 'UTC' WHERE id = ${key} AND consumed_at IS NULL`;
      if (won === 1) return;
      const row = await deps.prisma.oidcPayload.findUnique({ where: { id: key }, select: { grantId: true } });
      if (row?.grantId) await destroyGrant(deps, row.grantId);
      const { errors } = await import("oidc-provider");
      throw new errors.InvalidGrant(`${this.kind === "RefreshToken" ? "refresh token" : "authorization code"} already used`);
    }

    async destroy(id: string): Promise<void> {
      if (this.kind === "Grant") return destroyGrant(deps, id);
      await deps.prisma.oidcPayload.deleteMany({ where: { id: rowId(this.kind, id) } });
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      await deps.prisma.oidcPayload.deleteMany({ where: { kind: this.kind, grantId } });
    }
  };
}

async function sessionLive(deps: Deps, sessionId: string | null, accountId: unknown): Promise<boolean> {
  if (!sessionId || typeof accountId !== "string") return false;
  const [row] = await deps.prisma.$queryRaw<{ live: boolean }[]>`SELECT ${liveSessionSql(sessionId, accountId, Prisma.sql`s.project_id`)} AS live`;
  return !!row?.live;
}

/**
 * Ties a new grant to the linkgate session it was given in; until then it is never found. False
 * when the grant is gone meanwhile (a client's deletion or change ended it before it was bound).
 */
export async function bindGrantToSession(tx: Tx, grantId: string, sessionId: string): Promise<boolean> {
  const { count } = await tx.oidcPayload.updateMany({ where: { id: rowId("Grant", grantId), sessionId: null }, data: { sessionId } });
  return count === 1;
}

/** A new grant that was never bound to a session (src/oidc/interaction.ts), removed. */
export async function dropUnboundGrant(deps: Deps, grantId: string): Promise<void> {
  await deps.prisma.oidcPayload.deleteMany({ where: { id: rowId("Grant", grantId), sessionId: null } });
}

/**
 * A grant ends with its session. At the token endpoint a grant is revoked only because a used
 * code or refresh token came back: someone holds a copy, so the project hears about it.
 */
async function destroyGrant(deps: Deps, grantId: string): Promise<void> {
  const req = oidcRequest.getStore();
  const replay = req?.koa?.oidc?.route === "token";
  await transaction(deps.prisma, async (tx) => {
    const [row] = await tx.$queryRaw<{ session_id: string | null; client_id: string | null }[]>`
      DELETE FROM oidc_payloads WHERE id = ${rowId("Grant", grantId)} RETURNING session_id, payload->>'clientId' AS client_id`;
    // What the grant issued goes with it. A pending interaction may name the grant too (an
    // authorization by a browser that already holds one), but it is not the grant's: when another
    // user signs in on that browser, the provider ends the first user's session (and this grant)
    // and then resumes the very same interaction, which must still be there.
    await tx.$executeRaw`DELETE FROM oidc_payloads WHERE grant_id = ${grantId} AND kind <> 'Interaction'`;
    if (!row?.session_id) return;
    const session = await tx.session.findUnique({ where: { id: row.session_id }, select: { projectId: true, accountId: true } });
    await endSessions(tx, { id: row.session_id });
    if (!replay || !session) return;
    await enqueue(tx, {
      projectId: session.projectId,
      eventType: "security.suspicious_activity",
      data: {
        reason: req?.koa?.oidc?.params?.grant_type === "refresh_token" ? "refresh_token_reused" : "authorization_code_reused",
        user_id: session.accountId,
        client_id: row.client_id,
        client_address: req?.clientAddress,
      },
    });
    req?.log.warn({ grantId, clientId: row.client_id }, "a used code or refresh token was presented again; its grant and session are ended");
  });
}

/** The linkgate session a grant belongs to. */
export async function sessionOfGrant(deps: Deps, grantId: string): Promise<string | null> {
  const row = await deps.prisma.oidcPayload.findUnique({ where: { id: rowId("Grant", grantId) }, select: { sessionId: true } });
  return row?.sessionId ?? null;
}
