// Passwordless sign-in. Any linked identifier, a merged secondary's included, lands on the
// primary account; an unknown identifier creates an account. A sign-in makes its client
// address and device known places of the identifier (docs/security.md, "Known places").
import type { Actor, Deps, UserActor } from "../deps.ts";
import type { Tx } from "../db/client.ts";
import { transaction } from "../db/transaction.ts";
import { enqueue, enqueueAll } from "../webhooks/outbox.ts";
import type { EventType } from "../webhooks/event-types.ts";
import { IDENTIFIER_INPUT_ERRORS, OTPInvalid, RateLimited, Unauthenticated } from "../errors.ts";
import { newId } from "../ids.ts";
import { lockAccounts } from "../db/locks.ts";
import { loadAccount, oidcClaims, userEventData } from "./accounts.ts";
import { parseIdentifier, type Identifier } from "./identifiers.ts";
import { recordKnownPlaces } from "./known-places.ts";
import { consumeOtp, storedResult, storeResult } from "./otp.ts";
import { sendOtp, verifyOtp } from "./otp-flow.ts";
import { assertLiveSession, createSession, endSessions, type AuthMethod } from "./sessions.ts";
import { ACCESS_TOKEN_TTL_SECONDS } from "./tokens.ts";

export type TokenResponse = {
  access_token: string;
  id_token: string;
  token_type: "Bearer";
  expires_in: number;
  account_id: string;
};

/**
 * What each operation refuses with, besides bad credentials: its REST route and its GraphQL field
 * both list exactly these.
 */
export const SIGN_IN_ERRORS = {
  start: [...IDENTIFIER_INPUT_ERRORS, RateLimited],
  complete: [OTPInvalid, RateLimited],
};

export async function startSignIn(deps: Deps, actor: Actor, input: { email?: unknown; phone?: unknown }) {
  const identifier = parseIdentifier(input);
  return sendOtp(deps, { projectId: actor.projectId, accountId: null, purpose: "sign_in" }, identifier, "Your sign-in code", actor.clientAddress);
}

type SignedIn = { account_id: string; session_id: string };

/**
 * A client that retries a verify (a timeout, a double tap, N parallel requests) with the right
 * code gets the same sign-in: the same account and session, freshly signed tokens, while the
 * state lives and the session has not ended. Only the first verify creates the session and
 * emits the event.
 */
export async function completeSignIn(deps: Deps, actor: Actor, input: { stateId: string; otp: string }): Promise<TokenResponse> {
  const binding = { projectId: actor.projectId, accountId: null, purpose: "sign_in" as const };
  const checked = await verifyOtp(deps, binding, input.stateId, input.otp, actor.clientAddress);
  const replayed = checked.result as SignedIn | null;
  const { signedIn, created } = replayed ? { signedIn: replayed, created: false } : await signInOnce(deps, actor, input.stateId, checked.identifier);
  // A retry must not revive a session that was signed out (or merged away) since.
  if (!created) await assertLiveSession(deps.prisma, actor.projectId, signedIn.session_id, signedIn.account_id);
  return issueTokens(deps, actor.projectId, signedIn.account_id, signedIn.session_id);
}

async function signInOnce(deps: Deps, actor: Actor, stateId: string, identifier: Identifier): Promise<{ signedIn: SignedIn; created: boolean }> {
  return transaction(deps.prisma, async (tx) => {
    // The state's row lock: of parallel verifies, one signs in and the rest read its result.
    if (!(await consumeOtp(tx, stateId))) {
      const done = (await storedResult(tx, stateId)) as SignedIn | null;
      if (!done) throw new OTPInvalid();
      return { signedIn: done, created: false };
    }
    const accountId = await accountFor(tx, actor.projectId, identifier);
    // the identifier's own budget here from now on, whatever strangers do elsewhere
    await recordKnownPlaces(tx, actor.projectId, identifier, actor.clientAddress);
    const sessionId = await startSession(tx, actor, accountId, "otp", [
      ["user.authentication.success", { method: "otp", identifier_type: identifier.kind }],
    ]);
    const signedIn = { account_id: accountId, session_id: sessionId };
    await storeResult(tx, stateId, signedIn);
    return { signedIn, created: true };
  });
}

/**
 * The primary account that signing in as `accountId` lands on. Locked like a merge locks it:
 * a sign-in racing a merge of this account waits, then lands on the primary instead of
 * opening a session on a fresh secondary.
 */
export async function primaryOf(tx: Tx, accountId: string): Promise<string> {
  const [row] = await lockAccounts(tx, [accountId]);
  if (!row) throw new Unauthenticated("this account no longer exists");
  return row.merge_role === "secondary" && row.merged_with_id ? row.merged_with_id : row.id;
}

/** Opens a session on a (primary) account and writes the sign-in's events with it. */
export async function startSession(tx: Tx, actor: Actor, accountId: string, method: AuthMethod, events: Array<[EventType, object]>): Promise<string> {
  const { projectId } = actor;
  await tx.account.update({ where: { id: accountId }, data: { lastLoginAt: new Date() } });
  const sessionId = await createSession(tx, projectId, accountId, method, actor);
  const { user } = await userEventData(tx, projectId, accountId);
  await enqueueAll(tx, events.map(([eventType, extra]) => ({ projectId, eventType, data: { user, ...extra } })));
  return sessionId;
}

/** The primary account this identifier signs into, creating an account for a new identifier. */
async function accountFor(tx: Tx, projectId: string, identifier: Identifier): Promise<string> {
  const found = await tx.identifier.findUnique({
    where: { projectId_kind_value: { projectId, kind: identifier.kind, value: identifier.value } },
    select: { accountId: true },
  });
  if (found) return primaryOf(tx, found.accountId);
  const id = newId("acc");
  await tx.account.create({
    data: {
      id,
      projectId,
      identifiers: { create: { id: newId("idt"), projectId, kind: identifier.kind, value: identifier.value, origin: "own" } },
    },
  });
  await enqueue(tx, { projectId, eventType: "user.created", data: await userEventData(tx, projectId, id) });
  return id;
}

/** Tokens for a session: `auth_time` and `amr` say when and how the session last authenticated. */
export async function issueTokens(deps: Deps, projectId: string, accountId: string, sessionId: string): Promise<TokenResponse> {
  const [account, session] = await Promise.all([
    loadAccount(deps.prisma, projectId, accountId),
    deps.prisma.session.findUnique({ where: { id: sessionId }, select: { authTime: true, authMethod: true } }),
  ]);
  if (!account || !session) throw new OTPInvalid();
  const claims = oidcClaims(account);
  const auth_time = Math.floor(session.authTime.getTime() / 1000);
  const opts = { subject: accountId, audience: projectId, ttlSeconds: ACCESS_TOKEN_TTL_SECONDS };
  const [access_token, id_token] = await Promise.all([
    deps.keys.sign({ token_use: "access", sid: sessionId, auth_time, scope: "openid profile email phone" }, opts),
    deps.keys.sign({ ...claims, sub: undefined, token_use: "id", sid: sessionId, auth_time, amr: [session.authMethod] }, opts),
  ]);
  return { access_token, id_token, token_type: "Bearer", expires_in: ACCESS_TOKEN_TTL_SECONDS, account_id: accountId };
}

export async function userinfo(deps: Deps, projectId: string, accountId: string) {
  const account = await loadAccount(deps.prisma, projectId, accountId);
  if (!account) throw new Unauthenticated("this account no longer exists");
  return oidcClaims(account);
}

export async function signOut(deps: Deps, actor: UserActor) {
  await endSessions(deps.prisma, { id: actor.user.sessionId });
  return true;
}
