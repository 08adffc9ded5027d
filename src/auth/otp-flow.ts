// The OTP steps shared by sign-in and linking: rate-limited sending, and verification with
// per-subject failure limits and a security event when a state dies of wrong tries.
import type { Deps } from "../deps.ts";
import { transaction } from "../db/transaction.ts";
import { enqueue } from "../delivery/outbox.ts";
import { OTPInvalid } from "../errors.ts";
import type { Identifier } from "./identifiers.ts";
import { checkOtp, createOtpState, type CheckedOtp, type OtpBinding } from "./otp.ts";
import { assertUnder, consume, countFailure } from "./rate-limit.ts";

const identifierKey = (projectId: string, i: Identifier) => `${projectId}:${i.kind}:${i.value}`;
const failKey = (projectId: string, i: Identifier) => `fail:id:${identifierKey(projectId, i)}`;

export async function sendOtp(deps: Deps, binding: OtpBinding, identifier: Identifier, subject: string): Promise<{ stateId: string }> {
  const checks = [{ key: `send:id:${identifierKey(binding.projectId, identifier)}`, limit: deps.limits.sendsPerIdentifier }];
  if (binding.accountId) checks.push({ key: `send:acc:${binding.accountId}`, limit: deps.limits.sendsPerAccount });
  await consume(deps.prisma, checks, [{ key: failKey(binding.projectId, identifier), limit: deps.limits.failuresPerSubject }]);
  const { stateId, code } = await createOtpState(deps.prisma, deps.otpKey, binding, identifier);
  await deps.messenger.send({
    to: identifier,
    subject,
    text: `Your code is ${code}. It expires in 10 minutes. If you did not ask for it, ignore this message.`,
    code,
  });
  return { stateId };
}

export async function verifyOtp(deps: Deps, binding: OtpBinding, stateId: unknown, otp: unknown): Promise<CheckedOtp> {
  if (typeof stateId !== "string" || typeof otp !== "string" || !stateId || !otp) {
    throw new OTPInvalid("send the state_id and the six-digit code");
  }
  if (binding.accountId) await assertUnder(deps.prisma, [{ key: `fail:acc:${binding.accountId}`, limit: deps.limits.failuresPerSubject }]);
  try {
    return await checkOtp(deps.prisma, deps.otpKey, binding, stateId, otp);
  } catch (err) {
    if (err instanceof OTPInvalid) await onWrongCode(deps, binding, stateId, err as WrongCode);
    throw err;
  }
}

type WrongCode = OTPInvalid & { exhausted?: boolean; identifier?: Identifier };

// Wrong codes count against the account (checked before every verify) and against the
// identifier (checked before every send), so opening many states buys no extra guesses.
async function onWrongCode(deps: Deps, binding: OtpBinding, stateId: string, err: WrongCode) {
  if (binding.accountId) await countFailure(deps.prisma, `fail:acc:${binding.accountId}`, deps.limits.failuresPerSubject);
  if (err.identifier) await countFailure(deps.prisma, failKey(binding.projectId, err.identifier), deps.limits.failuresPerSubject);
  if (!err.exhausted) return;
  await transaction(deps.prisma, (tx) =>
    enqueue(tx, {
      projectId: binding.projectId,
      eventType: "security.suspicious_activity",
      data: {
        reason: "otp_attempts_exhausted",
        purpose: binding.purpose,
        state_id: stateId,
        ...(binding.accountId ? { user_id: binding.accountId } : {}),
      },
    }),
  );
}
