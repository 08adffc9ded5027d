// Passwordless sign-in (CONTRACT section 2). Any linked identifier, a merged secondary's
// included, lands on the primary account; an unknown identifier creates an account.
import type { Actor, Deps, UserActor } from "../deps.ts";
import type { Tx } from "../db/client.ts";
import { transaction } from "../db/transaction.ts";
import { enqueue } from "../delivery/outbox.ts";
import { OTPInvalid, Unauthenticated } from "../errors.ts";
import { newId } from "../ids.ts";
import { lockAccounts } from "../linking/sql.ts";
import { loadAccount, oidcClaims, userEventData } from "./accounts.ts";
import { parseIdentifier, type Identifier } from "./identifiers.ts";
import { consumeOtp } from "./otp.ts";
import { sendOtp, verifyOtp } from "./otp-flow.ts";
import { createSession, endSessions } from "./sessions.ts";
import { ACCESS_TOKEN_TTL_SECONDS } from "./tokens.ts";

export type TokenResponse = {
  access_token: string;
  id_token: string;
  token_type: "Bearer";
  expires_in: number;
  account_id: string;
};

export async function startSignIn(deps: Deps, actor: Actor, input: { email?: unknown; phone?: unknown }) {
  const identifier = parseIdentifier(input);
  return sendOtp(deps, { projectId: actor.projectId, accountId: null, purpose: "sign_in" }, identifier, "Your sign-in code");
}

export async function completeSignIn(deps: Deps, actor: Actor, input: { stateId: string; otp: string }): Promise<TokenResponse> {
  const binding = { projectId: actor.projectId, accountId: null, purpose: "sign_in" as const };
  const { identifier } = await verifyOtp(deps, binding, input.stateId, input.otp);
  const { accountId, sessionId } = await transaction(deps.prisma, async (tx) => {
    if (!(await consumeOtp(tx, input.stateId))) throw new OTPInvalid(); // sign-in codes are strictly single use
    const accountId = await accountFor(tx, actor.projectId, identifier);
    await tx.account.update({ where: { id: accountId }, data: { lastLoginAt: new Date() } });
    const sessionId = await createSession(tx, actor.projectId, accountId);
    await enqueue(tx, {
      projectId: actor.projectId,
      eventType: "user.authentication.success",
      data: await userEventData(tx, actor.projectId, accountId, { method: "otp", identifier_type: identifier.kind }),
    });
    return { accountId, sessionId };
  });
  return issueTokens(deps, actor.projectId, accountId, sessionId);
}

/** The primary account this identifier signs into, creating an account for a new identifier. */
async function accountFor(tx: Tx, projectId: string, identifier: Identifier): Promise<string> {
  const found = await tx.identifier.findUnique({
    where: { projectId_kind_value: { projectId, kind: identifier.kind, value: identifier.value } },
    select: { accountId: true },
  });
  if (found) {
    // Locked like a merge locks it: a sign-in racing a merge of this account waits, then
    // lands on the primary instead of opening a session on a fresh secondary.
    const [row] = await lockAccounts(tx, [found.accountId]);
    return row.merge_role === "secondary" && row.merged_with_id ? row.merged_with_id : row.id;
  }
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

export async function issueTokens(deps: Deps, projectId: string, accountId: string, sessionId: string): Promise<TokenResponse> {
  const account = await loadAccount(deps.prisma, projectId, accountId);
  if (!account) throw new OTPInvalid();
  const claims = oidcClaims(account);
  const opts = { subject: accountId, audience: projectId, ttlSeconds: ACCESS_TOKEN_TTL_SECONDS };
  const [access_token, id_token] = await Promise.all([
    deps.keys.sign({ token_use: "access", sid: sessionId, scope: "openid profile email phone" }, opts),
    deps.keys.sign({ ...claims, sub: undefined, token_use: "id", sid: sessionId }, opts),
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
