// Passwordless sign-in. Any linked identifier, a merged secondary's included, lands on the
// primary account; an unknown identifier creates an account. A sign-in makes its client
// address and device known places of the identifier (docs/security.md, "Known places").
import { randomBytes } from "node:crypto";
import type { Actor, AppGrant, Deps, UserActor } from "../deps.ts";
import type { Tx } from "../db/client.ts";
import { prepared, run } from "../db/fast.ts";
import { DecideAgain, retryingConflicts } from "../db/transaction.ts";
import { DELIVERY_CHANNEL, enqueueAll, envelope } from "../webhooks/outbox.ts";
import type { EventType } from "../webhooks/event-types.ts";
import { IDENTIFIER_INPUT_ERRORS, OTPInvalid, RateLimited, Unauthenticated } from "../errors.ts";
import { newId, newOrderedId } from "../ids.ts";
import { lockAccountAndPartner } from "../db/locks.ts";
import { claimsForScopes, claimsOf, loadAccount, oidcClaims, userEventData } from "./accounts.ts";
import { parseIdentifier, type Identifier } from "./identifiers.ts";
import { signInPlaces } from "./known-places.ts";
import { codeHash, isSixDigits, OTP_MAX_TRIES, requireCodeFields } from "./otp.ts";
import { addressCapGuard, identifierCapGuard, refuseCapped, sendOtp, wrongCode } from "./otp-flow.ts";
import { KNOWN_FOR_DAYS } from "../rate-limit.ts";
import { createSession, ENDED, endSessions, SESSION_TTL_MS, type AuthMethod } from "./sessions.ts";
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

/** sign_in_verify's one argument, as named jsonb fields (src/auth/sign-in.sql). */
type SignInVerifyInput = {
  /** The checks: whose state, its code's hash, the tries a state allows, the identifier-wide cap. */
  project: string;
  state: string;
  hash: string;
  max_tries: number;
  fail_prefix: string;
  fail_max: number;
  /** The cap's window: a wrong code is counted in the statement that judged it (wrong_code_counted). */
  fail_window: number;
  /** This request's address group and the wrong codes an identifier takes from one (sign_in_address_capped). */
  address_group: string;
  address_max: number;
  address_window: number;
  /** The request's places (the cap spares them), and what a success records as known for KNOWN_FOR_DAYS. */
  judge_places: string[];
  record_places: string[];
  known_days: number;
  /** The ids a new account, its identifier and the session get. */
  account_id: string;
  identifier_id: string;
  session_id: string;
  session_seconds: number;
  method: AuthMethod;
  client_address: string | null;
  user_agent: string | null;
  /** The events: ids ([0] user.created, used only for a new account), the channel waking the workers, the bodies. */
  channel: string;
  event_ids: string[];
  /** Placeholders in the bodies, replaced in SQL by the user object and the identifier's kind: random, so no value can imitate them. */
  user_mark: string;
  kind_mark: string;
  created_body: string;
  success_body: string;
};

type SignInVerifyRow = {
  outcome: "signed_in" | "replay" | "wrong" | "rate_limited" | "invalid" | "ended";
  tries: number | null;
  id_kind: string | null;
  id_value: string | null;
  retry_after: number | null;
  account_id: string | null;
  session_id: string | null;
  auth_time_ms: number | null;
  auth_method: string | null;
  email: string | null;
  phone: string | null;
  name: string | null;
  updated_at_ms: number | null;
};

// One jsonb argument, each field named where it is made and where it is read; planned once per connection (src/db/fast.ts).
const SIGN_IN_VERIFY = prepared<SignInVerifyRow>(
  "sign_in_verify",
  {
    outcome: "text",
    tries: "int4",
    id_kind: "text",
    id_value: "text",
    retry_after: "int4",
    account_id: "text",
    session_id: "text",
    auth_time_ms: "float8",
    auth_method: "text",
    email: "text",
    phone: "text",
    name: "text",
    updated_at_ms: "float8",
  },
  `SELECT outcome, tries, id_kind, id_value, retry_after, account_id, session_id, auth_time_ms, auth_method, email, phone, name, updated_at_ms
   FROM sign_in_verify($1::jsonb)`,
);

/**
 * A client that retries a verify (a timeout, a double tap, N parallel requests) with the right
 * code gets the same sign-in: the same account and session, freshly signed tokens, while the
 * state lives and the session has not ended. Only the first verify creates the session and
 * emits the events.
 *
 * The whole verify is one statement (src/auth/sign-in.sql sign_in_verify, a prepared statement
 * on the driver): the code judged under the state's row lock, the account found or created,
 * known places, session, events and the stored result, and what the tokens carry; a wrong code
 * is counted against its identifier there too. Only a wrong or unjudged code costs more
 * statements (its alarms, src/auth/otp-flow.ts).
 */
export async function completeSignIn(deps: Deps, actor: Actor, input: { stateId: string; otp: string }): Promise<TokenResponse> {
  const binding = { projectId: actor.projectId, accountId: null, purpose: "sign_in" as const };
  const { stateId, otp } = requireCodeFields(input.stateId, input.otp);
  if (!isSixDigits(otp)) throw new OTPInvalid("the code is six digits");
  const places = signInPlaces(actor.clientAddress);
  const eventIds = [newOrderedId("evt"), newOrderedId("evt")];
  const nonce = randomBytes(12).toString("hex");
  const [userMark, kindMark] = [`lg-user-${nonce}`, `lg-kind-${nonce}`];
  const p: SignInVerifyInput = {
    project: actor.projectId,
    state: stateId,
    hash: codeHash(deps.otpKey, stateId, otp),
    max_tries: OTP_MAX_TRIES,
    ...identifierCapGuard(deps),
    ...addressCapGuard(deps, actor.clientAddress),
    judge_places: places.judge,
    record_places: places.record,
    known_days: KNOWN_FOR_DAYS,
    account_id: newId("acc"),
    identifier_id: newId("idt"),
    session_id: newId("ses"),
    session_seconds: SESSION_TTL_MS / 1000,
    method: "otp",
    client_address: actor.clientAddress?.slice(0, 64) ?? null,
    user_agent: actor.userAgent?.slice(0, 512) ?? null,
    channel: DELIVERY_CHANNEL,
    event_ids: eventIds,
    user_mark: userMark,
    kind_mark: kindMark,
    created_body: envelope(eventIds[0], { projectId: actor.projectId, eventType: "user.created", data: { user: userMark } }),
    success_body: envelope(eventIds[1], {
      projectId: actor.projectId,
      eventType: "user.authentication.success",
      data: { user: userMark, method: "otp", identifier_type: kindMark },
    }),
  };
  const [row] = await retryingConflicts(() => run(deps.db, SIGN_IN_VERIFY, [JSON.stringify(p)]));
  switch (row.outcome) {
    case "signed_in":
      places.recorded();
      break;
    case "replay":
      break;
    case "ended":
      throw new Unauthenticated(ENDED);
    case "wrong":
      return wrongCode(deps, binding, stateId, { kind: row.id_kind as Identifier["kind"], value: row.id_value! }, row.tries!, actor.clientAddress);
    case "rate_limited":
      return refuseCapped(row.retry_after!);
    default:
      throw new OTPInvalid();
  }
  return signTokens(deps, actor.projectId, row.session_id!, {
    claims: claimsOf({ id: row.account_id!, name: row.name, updatedAtMs: row.updated_at_ms!, email: row.email, phone: row.phone }),
    authTimeMs: row.auth_time_ms!,
    method: row.auth_method!,
  });
}

/**
 * The primary account that signing in as `accountId` lands on. Locked like a merge locks it:
 * a sign-in racing a merge of this account waits, then lands on the primary instead of
 * opening a session on a fresh secondary.
 */
export async function primaryOf(tx: Tx, projectId: string, accountId: string): Promise<string> {
  return lockedPrimary(tx, projectId, accountId, () => new Unauthenticated("this account no longer exists"));
}

/**
 * The account's primary, the account and its merge partner row-locked in id order, as merges and
 * unmerges lock them (src/db/locks.ts); `gone()` is thrown when it no longer exists. Locking the
 * secondary alone and then writing to its primary (the session's sign-in) deadlocked with an
 * unmerge whenever the primary's id sorted first (test/security.sign-in-lock-order.test.ts).
 */
async function lockedPrimary(tx: Tx, projectId: string, accountId: string, gone: () => Error): Promise<string> {
  const locked = await lockAccountAndPartner(tx, projectId, accountId);
  const row = locked.find((a) => a.id === accountId);
  if (!row) throw gone();
  // merged with another while this waited for the lock: that partner is not locked
  if (row.merged_with_id && !locked.some((a) => a.id === row.merged_with_id)) throw new DecideAgain("the account was merged meanwhile");
  return row.merge_role === "secondary" && row.merged_with_id ? row.merged_with_id : row.id;
}

/**
 * primaryOf for the account of a row the caller has just read (the identifier or passkey being
 * signed in with): gone under the lock, it was deleted since that read, with what it held, and
 * the caller decides again from what is there now (an identity nobody holds signs up, a passkey
 * that went is not registered), as a code sign-in does (src/auth/sign-in.sql). It answered 401
 * "this account no longer exists" before, to a sign-in that had no session to have ended.
 */
export async function holderPrimaryOf(tx: Tx, projectId: string, accountId: string): Promise<string> {
  return lockedPrimary(tx, projectId, accountId, () => new DecideAgain("the account was deleted meanwhile"));
}

/** Opens a session on a (primary) account and writes the sign-in's events with it. */
/** `signedInWith`: the passkey or external identity the sign-in proved (createSession). */
export async function startSession(tx: Tx, actor: Actor, accountId: string, method: AuthMethod, events: Array<[EventType, object]>, signedInWith?: string): Promise<string> {
  const { projectId } = actor;
  await tx.account.update({ where: { id: accountId }, data: { lastLoginAt: new Date() } });
  const sessionId = await createSession(tx, projectId, accountId, method, actor, signedInWith);
  const { user } = await userEventData(tx, projectId, accountId);
  await enqueueAll(tx, events.map(([eventType, extra]) => ({ projectId, eventType, data: { user, ...extra } })));
  return sessionId;
}

/** Tokens for a session: `auth_time` and `amr` say when and how the session last authenticated. */
export async function issueTokens(deps: Deps, projectId: string, accountId: string, sessionId: string, app?: AppGrant): Promise<TokenResponse> {
  const [account, session] = await Promise.all([
    loadAccount(deps.prisma, projectId, accountId),
    deps.prisma.session.findUnique({ where: { id: sessionId }, select: { authTime: true, authMethod: true } }),
  ]);
  // Read after the sign-in (or re-authentication) committed: an account deleted since, with its
  // sessions, has ended the session these tokens were for. That is the ended session's answer
  // (docs/authentication.md, "Sessions"), not OTPInvalid, which no passkey or re-authentication
  // operation lists (GraphQL masked it as "Unexpected error.", a fault).
  if (!account || !session) throw new Unauthenticated(ENDED);
  return signTokens(deps, projectId, sessionId, { claims: oidcClaims(account), authTimeMs: session.authTime.getTime(), method: session.authMethod, app });
}

/**
 * The tokens a re-authentication answers: the caller's session with its new auth_time. Asked with
 * an app's token, they are that app's again (its client id and the scopes the user granted it),
 * so they are checked as the app's on every call: linkgate's own tokens for the session, which
 * describe the whole account, kept full access after the app was made third-party (29th review).
 */
export function reissueTokens(deps: Deps, actor: UserActor): Promise<TokenResponse> {
  return issueTokens(deps, actor.projectId, actor.user.accountId, actor.user.sessionId, actor.user.app);
}

/** issueTokens from what the caller already read: the account's claims, and the session's auth_time (ms) and method. */
export async function signTokens(
  deps: Deps,
  projectId: string,
  sessionId: string,
  s: { claims: ReturnType<typeof claimsOf>; authTimeMs: number; method: string; app?: AppGrant },
): Promise<TokenResponse> {
  const accountId = s.claims.sub;
  const auth_time = Math.floor(s.authTimeMs / 1000);
  const opts = { subject: accountId, audience: projectId, ttlSeconds: ACCESS_TOKEN_TTL_SECONDS };
  const grant = s.app ? { client_id: s.app.clientId, scope: s.app.scopes.join(" ") } : { scope: "openid profile email phone" };
  const claims = s.app ? claimsForScopes(s.claims, s.app.scopes) : s.claims;
  const [access_token, id_token] = await Promise.all([
    deps.keys.sign({ token_use: "access", sid: sessionId, auth_time, ...grant }, opts),
    deps.keys.sign({ ...claims, sub: undefined, token_use: "id", sid: sessionId, auth_time, amr: [s.method] }, opts),
  ]);
  return { access_token, id_token, token_type: "Bearer", expires_in: ACCESS_TOKEN_TTL_SECONDS, account_id: accountId };
}

/**
 * The account's claims in one prepared statement (src/db/fast.ts), the preferred e-mail and phone
 * picked as preferred() picks them (own first, then the oldest), as sign_in_verify reads them:
 * userinfo is the trivial request of the sign-in benchmark, and through Prisma it was two queries.
 */
const ACCOUNT_CLAIMS = prepared<{ name: string | null; updated_at_ms: number; email: string | null; phone: string | null }>(
  "account_claims",
  { name: "text", updated_at_ms: "float8", email: "text", phone: "text" },
  `SELECT a.name, extract(epoch FROM a.updated_at AT TIME ZONE 'UTC')::float8 * 1000 AS updated_at_ms,
     (SELECT i.value FROM identifiers i WHERE i.account_id = a.id AND i.kind = 'email' ORDER BY i.origin <> 'own', i.created_at LIMIT 1) AS email,
     (SELECT i.value FROM identifiers i WHERE i.account_id = a.id AND i.kind = 'phone' ORDER BY i.origin <> 'own', i.created_at LIMIT 1) AS phone
   FROM accounts a WHERE a.id = $1::text AND a.project_id = $2::text`,
);

export async function userinfo(deps: Deps, projectId: string, accountId: string) {
  const [a] = await run(deps.db, ACCOUNT_CLAIMS, [accountId, projectId]);
  if (!a) throw new Unauthenticated("this account no longer exists");
  return claimsOf({ id: accountId, name: a.name, updatedAtMs: a.updated_at_ms, email: a.email, phone: a.phone });
}

export async function signOut(deps: Deps, actor: UserActor) {
  await endSessions(deps.prisma, { id: actor.user.sessionId });
  return true;
}
