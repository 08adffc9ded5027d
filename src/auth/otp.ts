// OTP challenges for sign-in and linking. A state is bound to (project, account, purpose,
// identifier); the code is stored only as an HMAC under a server key; tries are counted by
// the same statement that reads the hash, outside any business transaction, so a failed
// verify can never roll its own count back.
import { randomInt } from "node:crypto";
import type { Db, Tx } from "../db/client.ts";
import { hmacHex } from "../crypto.ts";
import { OTPInvalid } from "../errors.ts";
import { newId } from "../ids.ts";
import type { Identifier } from "./identifiers.ts";
import { KNOWN_FOR_DAYS, type NewOtpState } from "../rate-limit.ts";

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
 * The identifier-wide cap (spared at `places`), the identifier's wrong codes from this address
 * group, and the signed-in subject's (a re-authentication's session; null: none), with their windows.
 */
export type JudgeGuard = {
  prefix: string;
  max: number;
  windowSeconds: number;
  places: string[];
  address: { group: string; max: number; windowSeconds: number };
  subject: { key: string; max: number; windowSeconds: number } | null;
};

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
 *
 * Judged by otp_judge (src/auth/sign-in.sql) in the identifier's turn: a state whose identifier
 * took its hourly wrong codes from everywhere is not judged (nor its try counted) unless the
 * call comes from a known place, nor one whose identifier took its wrong codes from this
 * address group; a wrong code is counted against the identifier before the next code of it is
 * judged, so parallel verifies cannot all be judged before any is counted (31st review). A code
 * of a signed-in subject (`guard.subject`) is judged in the subject's turn as well, under its
 * wrong codes, and counted against it there (33rd review).
 */
export async function checkOtp(db: Db, key: Buffer, binding: OtpBinding, stateId: string, code: string, guard: JudgeGuard): Promise<CheckedOtp> {
  if (!isSixDigits(code)) throw new OTPInvalid("the code is six digits");
  const hash = codeHash(key, stateId, code);
  const p = {
    project: binding.projectId,
    state: stateId,
    hash,
    purpose: binding.purpose,
    account: binding.accountId,
    session: binding.sessionId ?? null,
    max_tries: OTP_MAX_TRIES,
    fail_prefix: guard.prefix,
    fail_max: guard.max,
    fail_window: guard.windowSeconds,
    address_group: guard.address.group,
    address_max: guard.address.max,
    address_window: guard.address.windowSeconds,
    judge_places: guard.places,
    known_days: KNOWN_FOR_DAYS,
    ...(guard.subject ? { subject_key: guard.subject.key, subject_max: guard.subject.max, subject_window: guard.subject.windowSeconds } : {}),
  };
  const rows = await db.$queryRaw<{ ok: boolean; attempts: number; kind: Identifier["kind"]; value: string }[]>`
    SELECT ok, attempts, kind, value FROM otp_judge(${JSON.stringify(p)}::jsonb)`;
  const live = rows[0];
  if (live?.ok) return { identifier: { kind: live.kind, value: live.value }, result: null };
  if (live) {
    throw Object.assign(new OTPInvalid(), {
      exhausted: live.attempts >= OTP_MAX_TRIES,
      identifier: { kind: live.kind, value: live.value },
    });
  }
  return replayOfSuccess(db, binding, stateId, hash);
}

/**
 * The stored answer of a state a right code already used, for a client retrying its verify, while
 * the state lives; a wrong code counts one of the state's tries (otp_replay, src/auth/sign-in.sql).
 * Expiry is the database's now(), as otp_judge's and as the state's expires_at was written: this
 * gateway's clock, running behind, answered a code's tokens again after it expired
 * (docs/operations.md, "Clocks").
 */
async function replayOfSuccess(db: Db, binding: OtpBinding, stateId: string, hash: string): Promise<CheckedOtp> {
  const [done] = await db.$queryRaw<{ kind: Identifier["kind"]; value: string; result: unknown }[]>`
    SELECT s.kind::text AS kind, s.value, r.result
    FROM otp_replay(${binding.projectId}::text, ${stateId}::text, ${binding.purpose}::otp_purpose, ${binding.accountId}::text,
                    ${binding.sessionId ?? null}::text, ${hash}::text, ${OTP_MAX_TRIES}::int) AS r(result)
    JOIN otp_states s ON s.id = ${stateId}
    WHERE r.result IS NOT NULL`;
  if (done) return { identifier: { kind: done.kind, value: done.value }, result: done.result };
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
