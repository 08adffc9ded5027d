// OTP challenges for sign-in and linking. A state is bound to (project, account, purpose,
// identifier); the code is stored only as an HMAC under a server key; tries are counted by
// the same statement that reads the hash, outside any business transaction, so a failed
// verify can never roll its own count back.
import { randomInt } from "node:crypto";
import type { Db, Tx } from "../db/client.ts";
import { hmacHex, safeEqual } from "../crypto.ts";
import { OTPInvalid } from "../errors.ts";
import { newId } from "../ids.ts";
import type { Identifier } from "./identifiers.ts";
import { Prisma } from "../generated/prisma/client.ts";
import { withHoles } from "../db/fast.ts";
import { identifierCappedCondition, type NewOtpState } from "../rate-limit.ts";

export const OTP_TTL_MS = 10 * 60 * 1000;
export const OTP_MAX_TRIES = 5;

/** `external_confirm`: proves an e-mail before an external identity joins its account (src/auth/external/sign-in.ts) */
export type OtpPurpose = "sign_in" | "link" | "reauth" | "external_confirm";
/** A state is good only for this project, account, purpose and (re-authentication) session. */
export type OtpBinding = { projectId: string; accountId: string | null; purpose: OtpPurpose; sessionId?: string };

export function generateCode(): string {
  return randomInt(0, 1_000_000).toString().padStart(6, "0");
}

/** What a person types: six digits. Anything else is refused before any hash is made. */
export function isSixDigits(code: string): boolean {
  return /^\d{6}$/.test(code);
}

/** A verify's two fields are both non-empty strings, or the verify is refused as the code would be. */
export function requireCodeFields(stateId: unknown, otp: unknown): { stateId: string; otp: string } {
  if (typeof stateId !== "string" || typeof otp !== "string" || !stateId || !otp) throw new OTPInvalid("send the state_id and the six-digit code");
  return { stateId, otp };
}

export function codeHash(key: Buffer, stateId: string, code: string): string {
  return hmacHex(key, `${stateId}:${code}`);
}

/**
 * A new state and its code, for the send's own statement to write (src/rate-limit.ts
 * countAndWrite writes it only when no limit refuses the send).
 */
export function newOtpState(key: Buffer, binding: OtpBinding, identifier: Identifier): { state: NewOtpState; code: string } {
  const id = newId("otp");
  const code = generateCode();
  const state: NewOtpState = {
    id,
    projectId: binding.projectId,
    accountId: binding.accountId,
    sessionId: binding.sessionId ?? null,
    purpose: binding.purpose,
    identifier,
    codeHash: codeHash(key, id, code),
    ttlSeconds: OTP_TTL_MS / 1000,
  };
  return { state, code };
}

export type CheckedOtp = { identifier: Identifier; /** set when this state already succeeded */ result: unknown | null };

/**
 * Checks a code against a live state bound to `binding`. Wrong codes throw OTPInvalid with
 * `exhausted` telling whether this try killed the state. A correct code on a state that
 * already succeeded returns its stored result, so a retried verify gets the same answer.
 *
 * The comparison happens inside the statement that counts the try, under the state's row
 * lock: a wrong code is counted before anyone can learn it was wrong, so parallel guesses
 * cannot exceed OTP_MAX_TRIES, while a right code is never counted, so N parallel verifies of
 * the right code (a client retrying) never use up the state or count as failures. Comparing
 * in SQL is not constant-time, but what is compared are HMACs under a server key: timing can
 * at most reveal a prefix of an HMAC, which says nothing about the code.
 */
/**
 * A state whose identifier took its hourly wrong codes from everywhere is not judged (nor its
 * try counted) unless the call comes from a known place: the key prefix and maximum of that
 * counter, and the call's places (src/rate-limit.ts identifierCappedCondition).
 */
/** The identifier-wide cap (spared at `places`), and the identifier's wrong codes from this address group. */
export type JudgeGuard = { keyPrefix: string; max: number; places: string[]; address: { group: string; max: number } };

export async function checkOtp(db: Db, key: Buffer, binding: OtpBinding, stateId: string, code: string, guard?: JudgeGuard): Promise<CheckedOtp> {
  if (!isSixDigits(code)) throw new OTPInvalid("the code is six digits");
  const hash = codeHash(key, stateId, code);
  const uncapped = guard
    ? Prisma.sql`AND NOT EXISTS (SELECT 1 FROM rate_limits r WHERE ${withHoles(identifierCappedCondition("\0", "\0", "\0"), guard.keyPrefix, guard.max, guard.places)})
        AND sign_in_address_capped(s.project_id, s.kind, s.value, ${guard.address.group}, ${guard.address.max}::int) IS NULL`
    : Prisma.empty;
  const rows = await db.$queryRaw<{ ok: boolean; attempts: number; kind: Identifier["kind"]; value: string }[]>`
    UPDATE otp_states s SET attempts = s.attempts + CASE WHEN s.code_hash = ${hash} THEN 0 ELSE 1 END
    WHERE s.id = ${stateId} AND s.project_id = ${binding.projectId} AND s.purpose = ${binding.purpose}::otp_purpose
      AND s.account_id IS NOT DISTINCT FROM ${binding.accountId} AND s.session_id IS NOT DISTINCT FROM ${binding.sessionId ?? null}
      AND s.consumed_at IS NULL AND s.expires_at > now() AND s.attempts < ${OTP_MAX_TRIES} ${uncapped}
    RETURNING s.code_hash = ${hash} AS ok, s.attempts, s.kind::text AS kind, s.value`;
  const live = rows[0];
  if (live?.ok) return { identifier: { kind: live.kind, value: live.value }, result: null };
  if (live) {
    throw Object.assign(new OTPInvalid(), {
      exhausted: live.attempts >= OTP_MAX_TRIES,
      identifier: { kind: live.kind, value: live.value },
    });
  }
  return replayOfSuccess(db, key, binding, stateId, code);
}

async function replayOfSuccess(db: Db, key: Buffer, binding: OtpBinding, stateId: string, code: string): Promise<CheckedOtp> {
  const done = await db.otpState.findFirst({
    where: {
      id: stateId,
      projectId: binding.projectId,
      purpose: binding.purpose,
      accountId: binding.accountId,
      sessionId: binding.sessionId ?? null,
      consumedAt: { not: null },
      expiresAt: { gt: new Date() },
    },
  });
  if (done?.result != null && safeEqual(done.codeHash, codeHash(key, stateId, code))) {
    return { identifier: { kind: done.kind, value: done.value }, result: done.result };
  }
  throw new OTPInvalid();
}

/**
 * Marks a state used inside the business transaction. The update takes the state's row lock,
 * so of two verifies of one state the second waits here and then gets false.
 */
export async function consumeOtp(tx: Tx, stateId: string): Promise<boolean> {
  const { count } = await tx.otpState.updateMany({ where: { id: stateId, consumedAt: null }, data: { consumedAt: new Date() } });
  return count === 1;
}

/** What the winner of a state stored for its retries (read after consumeOtp said false). */
export async function storedResult(tx: Tx, stateId: string): Promise<unknown | null> {
  const done = await tx.otpState.findUnique({ where: { id: stateId }, select: { result: true } });
  return done?.result ?? null;
}

export async function storeResult(tx: Tx, stateId: string, result: object): Promise<void> {
  await tx.otpState.update({ where: { id: stateId }, data: { result } });
}
