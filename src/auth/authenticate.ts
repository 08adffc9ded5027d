// Turns request credentials into an Actor. REST and GraphQL both call this; neither checks
// credentials any other way.
import { safeEqual, sha256Hex } from "../crypto.ts";
import type { Actor, AppGrant, Deps, KeyActor, KeyKind, UserActor } from "../deps.ts";
import { Forbidden, InsufficientScope, Unauthenticated } from "../errors.ts";
import { ASYNC_COMMIT, prepared, run } from "../db/fast.ts";
import { ENDED, liveSessionCondition, touchSessionStatement } from "./sessions.ts";

export type Credentials = { apiKey?: string | null; bearer?: string | null; clientAddress: string; userAgent?: string | null };

export function bearerToken(authorization: string | null | undefined): string | null {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
  return m ? m[1] : null;
}

/**
 * The API key of a request that acts for the project (a sign-in's start and verify, GraphQL), on
 * the fast path (src/db/fast.ts): through Prisma's raw-query path it cost a sign-in flow two
 * passes through Prisma's runtime. Read on every request and never cached, so a revoked key is
 * refused on its next request, in every process.
 */
const AUTHENTICATE_PROJECT = prepared<{ id: string; project_id: string; kind: KeyKind }>(
  "authenticate_project",
  { id: "text", project_id: "text", kind: "text" },
  `SELECT id, project_id, kind::text AS kind FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL`,
);

export async function authenticateProject(deps: Deps, creds: Omit<Credentials, "bearer">): Promise<KeyActor> {
  if (!creds.apiKey) throw new Unauthenticated("send the project API key in X-API-Key");
  const [row] = await run(deps.db, AUTHENTICATE_PROJECT, [sha256Hex(creds.apiKey)]);
  if (!row) throw new Unauthenticated("unknown or revoked API key");
  return { projectId: row.project_id, keyKind: row.kind, clientAddress: creds.clientAddress, userAgent: creds.userAgent ?? undefined, apiKeyId: row.id };
}

/** The database's clock in ms since the epoch, read in the statement that reads auth_time. */
const NOW_MS = "extract(epoch FROM now())::float8 * 1000";

/**
 * The API key, the token's session and its project in one statement, on the fast path
 * (src/db/fast.ts): every linking call pays for it. $1 session id, $2 API key hash, $3 account,
 * $4 the OAuth app's client id (null for linkgate's own tokens). The session's auth_time travels
 * as ms since the epoch (stored as UTC), with its age by the database's clock (authAgeOf). `delegated` says the token belongs to an app that is
 * not one of the project's own (docs/oidc.md): decided here, from the client row as it is now,
 * so marking an app third-party takes effect on its tokens' next call.
 *
 * The session's touch (at most once a minute) commits without waiting for the disk: a request
 * should not wait for a flush of a timestamp a crash may lose without harm (it shows the
 * session's last use to the minute). Sampled during the link benchmark's closed loop, the
 * touching calls spent most of their time waiting on the write-ahead log's flushes, which every
 * link's durable commit also waits on. The condition sits on the API key's row, read whenever
 * the touch can write (the touch needs that same key).
 */
const AUTHENTICATE_USER = prepared<{ project_id: string; kind: KeyKind; auth_time_ms: number | null; now_ms: number; delegated: boolean }>(
  "authenticate_user",
  { project_id: "text", kind: "text", now_ms: "float8", auth_time_ms: "float8", delegated: "bool" },
  `WITH touched AS (${touchSessionStatement("$1", "$2")})
   SELECT k.project_id, k.kind::text AS kind, ${NOW_MS} AS now_ms,
     (SELECT extract(epoch FROM s.auth_time AT TIME ZONE 'UTC')::float8 * 1000 FROM sessions s JOIN accounts a ON a.id = s.account_id
      WHERE ${liveSessionCondition("$1", "$3", "k.project_id")}) AS auth_time_ms,
     ($4::text IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM oauth_clients c WHERE c.client_id = $4::text AND c.project_id = k.project_id AND c.first_party)) AS delegated
   FROM api_keys k WHERE k.key_hash = $2 AND k.revoked_at IS NULL AND ${ASYNC_COMMIT}`,
);

/**
 * How long ago the session last authenticated, by the database's clock: the one every gateway
 * shares, and the one a sign-in and a re-authentication write auth_time with. Measured with the
 * serving gateway's own clock, a gateway running behind kept a stale session recent for as long
 * as it was behind (docs/operations.md, "Clocks").
 */
const authAgeOf = (authTimeMs: number, nowMs: number) => nowMs - authTimeMs;

/** The app a verified access token was issued to, with its granted scopes; none for linkgate's own. */
function appOf(token: { clientId?: string; scopes?: string[] }): AppGrant | undefined {
  return token.clientId ? { clientId: token.clientId, scopes: token.scopes ?? [] } : undefined;
}

/**
 * The API key and the token's session are checked in one round trip. Everything the API does
 * with a user's token manages that user's account, so this is the one place where a
 * third-party app's token is refused: it reaches userinfo only (authenticateToken).
 */
export async function authenticateUser(deps: Deps, creds: Credentials): Promise<UserActor> {
  if (!creds.apiKey) throw new Unauthenticated("send the project API key in X-API-Key");
  if (!creds.bearer) throw new Unauthenticated("send the access token as Authorization: Bearer <token>");
  const verified = await deps.keys.verifyAccessToken(creds.bearer);
  const { sub, aud, sid, clientId } = verified;
  const keyHash = sha256Hex(creds.apiKey);
  const [row] = await run(deps.db, AUTHENTICATE_USER, [sid, keyHash, sub, clientId ?? null]);
  if (!row) throw new Unauthenticated("unknown or revoked API key");
  if (aud !== row.project_id) throw new Forbidden("this access token belongs to another project");
  if (row.auth_time_ms == null) throw new Unauthenticated(ENDED);
  if (row.delegated) throw new InsufficientScope();
  return {
    projectId: row.project_id,
    keyKind: row.kind,
    clientAddress: creds.clientAddress,
    userAgent: creds.userAgent ?? undefined,
    user: { accountId: sub, sessionId: sid, authTime: new Date(row.auth_time_ms), authAgeMs: authAgeOf(row.auth_time_ms, row.now_ms), app: appOf(verified) },
  };
}

/** Userinfo takes the token alone, like any OIDC userinfo endpoint; an app's token comes with its scopes. */
export async function authenticateToken(deps: Deps, bearer: string | null, clientAddress: string): Promise<UserActor> {
  if (!bearer) throw new Unauthenticated("send the access token as Authorization: Bearer <token>");
  const verified = await deps.keys.verifyAccessToken(bearer);
  const { sub, aud, sid } = verified;
  const [row] = await run(deps.db, AUTHENTICATE_TOKEN, [sid, sub, aud]);
  if (row?.auth_time_ms == null) throw new Unauthenticated(ENDED);
  const authAgeMs = authAgeOf(row.auth_time_ms, row.now_ms);
  return { projectId: aud, keyKind: "publishable", clientAddress, user: { accountId: sub, sessionId: sid, authTime: new Date(row.auth_time_ms), authAgeMs, app: appOf(verified) } };
}

/** The token's live session ($1 session, $2 account, $3 project): its auth_time as ms since the epoch, or NULL. On the fast path: userinfo is a trivial request. */
const AUTHENTICATE_TOKEN = prepared<{ auth_time_ms: number | null; now_ms: number }>(
  "authenticate_token",
  { now_ms: "float8", auth_time_ms: "float8" },
  `SELECT ${NOW_MS} AS now_ms, (SELECT extract(epoch FROM s.auth_time AT TIME ZONE 'UTC')::float8 * 1000 FROM sessions s JOIN accounts a ON a.id = s.account_id
           WHERE ${liveSessionCondition("$1::text", "$2::text", "$3::text")}) AS auth_time_ms`,
);

export function isAdmin(deps: Deps, token: string | null | undefined): boolean {
  return !!deps.config.adminToken && !!token && safeEqual(token, deps.config.adminToken);
}
