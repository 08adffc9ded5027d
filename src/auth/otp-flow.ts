// The OTP steps shared by sign-in and linking: rate-limited sending, and verification with
// per-subject failure limits and a security event when a state dies or a ceiling trips.
//
// Who can move which counter decides how it is keyed (docs/security.md, "Abuse limits"): anyone
// can ask for a code for anyone's e-mail, so sends and wrong codes per identifier are counted
// per client address too (an address group: IPv6 per /64). An attacker then exhausts only their
// own (identifier, address) budget and the owner, at another address, still signs in.
// Per-address and per-project ceilings bound what one client, and all clients together, can
// make the service send; wrong codes per identifier bound guessing from many addresses. The
// last two are the bounds a stranger spread over many addresses can exhaust for everyone, so
// they do not apply where the identifier signed in before (src/auth/known-places.ts). Sends
// from there count against a budget of their own, per identifier and per project, which only
// sends to identifiers known at the sender's place can use up.
import type { Deps } from "../deps.ts";
import { transaction } from "../db/transaction.ts";
import { enqueue } from "../webhooks/outbox.ts";
import { InvalidIdentifier, OTPInvalid, RateLimited, ServiceUnavailable } from "../errors.ts";
import { RecipientRefused } from "../messaging/transport.ts";
import { recordOtpSend, recordOtpSendFailure, recordRateLimitRefusal, type RateLimitName } from "../metrics.ts";
import { inboxOf, untextable, type Contact, type Identifier } from "./identifiers.ts";
import { checkOtp, codeHash, isSixDigits, newOtpState, OTP_MAX_TRIES, requireCodeFields, type CheckedOtp, type OtpBinding } from "./otp.ts";
import { placeIds, placesHere } from "./known-places.ts";
import { addressGroup, projectSendKey, assertNoneOver, countAndWrite, KNOWN_FOR_DAYS, readCounters, stateAddressCapped, stateIdentifierCapped, type Check, type Counter } from "../rate-limit.ts";

const identifierAtAddress = (projectId: string, i: Identifier, address: string) => `${projectId}:${i.kind}:${i.value}@${addressGroup(address)}`;
const FAIL_IDENTIFIER = "fail:id:";

/** Codes are counted per inbox (identifiers.ts inboxOf), wrong codes per identifier. */
const inbox = (i: Identifier): Identifier => ({ kind: i.kind, value: inboxOf(i) });

const keys = {
  sendIdentifier: (p: string, i: Identifier, a: string) => `send:ida:${identifierAtAddress(p, inbox(i), a)}`,
  sendAddress: (p: string, a: string) => `send:addr:${p}:${addressGroup(a)}`,
  sendIdentifierAll: (p: string, i: Identifier) => `send:id:${p}:${i.kind}:${inboxOf(i)}`,
  sendAccount: (accountId: string) => `send:acc:${accountId}`,
  sendProject: projectSendKey,
  sendKnownIdentifier: (p: string, i: Identifier) => `send:known:id:${p}:${i.kind}:${inboxOf(i)}`,
  sendKnownProject: (p: string, kind: Identifier["kind"]) => `send:known:prj:${p}:${kind}`,
  failIdentifier: (p: string, i: Identifier, a: string) => `fail:ida:${identifierAtAddress(p, i, a)}`,
  failAccount: (accountId: string) => `fail:acc:${accountId}`,
  sendSession: (sessionId: string) => `send:ses:${sessionId}`,
  failSession: (sessionId: string) => `fail:ses:${sessionId}`,
  /** STATE_FAILURES (src/rate-limit.ts) builds this key from a state in SQL */
  failIdentifierAll: (p: string, i: Identifier) => `${FAIL_IDENTIFIER}${p}:${i.kind}:${i.value}`,
};

/**
 * Whose budget a signed-in code spends: a re-authentication's is its session's, anything else's
 * (a link request's) the account's. Re-authentication needs no recent sign-in, so any token of
 * the account, a stale or stolen one included, can ask for codes and type wrong ones: counted
 * per account, that spent the owner's budgets for an hour, and the owner could neither
 * re-authenticate nor add an address (docs/security.md, "Abuse limits").
 */
function subjectKeys(binding: OtpBinding): { send: string; fail: string } | null {
  if (binding.purpose === "reauth" && binding.sessionId) return { send: keys.sendSession(binding.sessionId), fail: keys.failSession(binding.sessionId) };
  if (binding.accountId) return { send: keys.sendAccount(binding.accountId), fail: keys.failAccount(binding.accountId) };
  return null;
}

/** The metric label of each key family (src/metrics.ts RATE_LIMITS); per-project sends by channel. */
function limitName(key: string): RateLimitName | undefined {
  if (key.startsWith("send:ida:")) return "sends_per_identifier_address";
  if (key.startsWith("send:addr:")) return "sends_per_address";
  if (key.startsWith("send:id:")) return "sends_per_identifier";
  if (key.startsWith("send:acc:")) return "sends_per_account";
  if (key.startsWith("send:ses:")) return "sends_per_session";
  if (key.startsWith("send:prj:")) return key.endsWith(":phone") ? "sms_per_project" : "emails_per_project";
  if (key.startsWith("send:known:id:")) return "known_place_sends_per_identifier";
  if (key.startsWith("send:known:prj:")) return key.endsWith(":phone") ? "known_place_sms_per_project" : "known_place_emails_per_project";
  if (key.startsWith("fail:ida:")) return "wrong_codes_per_identifier_address";
  if (key.startsWith("fail:acc:")) return "wrong_codes_per_account";
  if (key.startsWith("fail:ses:")) return "wrong_codes_per_session";
  if (key.startsWith(FAIL_IDENTIFIER)) return "wrong_codes_per_identifier";
  return undefined;
}

/** Throws RateLimited when a counter refuses, after counting the refusal under each limit that refused. */
function refuseIfOver(counters: Counter[]): void {
  recordRefusals(counters);
  assertNoneOver(counters);
}

/** One refusal in the metrics for each counter that is over its limit. */
function recordRefusals(counters: Counter[]): void {
  for (const c of counters) {
    const name = c.over ? limitName(c.key) : undefined;
    if (name) recordRateLimitRefusal(name);
  }
}

/** Ceilings whose first refusal in a window is worth telling the project about. */
const ALARMS: Array<[prefix: string, reason: string]> = [
  ["send:addr:", "send_ceiling_per_address"],
  ["send:id:", "sends_per_identifier"],
  ["send:prj:", "send_ceiling_per_project"],
  ["send:known:prj:", "send_ceiling_known_places_per_project"],
  [FAIL_IDENTIFIER, "wrong_codes_per_identifier"],
];

/**
 * Counts the send against every limit and, when none refuses, writes the state: one statement.
 * `notOwnedBy` (linking) first checks, in the same statement, that the identifier does not
 * already sign into that account; when it does, nothing is counted and `refuse()` is thrown.
 */
export async function sendOtp(
  deps: Deps,
  binding: OtpBinding,
  identifier: Contact,
  subject: string,
  clientAddress: string,
  notOwnedBy?: { accountId: string; refuse: () => Error },
): Promise<{ stateId: string }> {
  const { projectId } = binding;
  // refused before anything is counted: no budget is spent on a number that is never texted
  const untexted = identifier.kind === "phone" ? untextable(identifier.value, deps.config.smsCountries) : null;
  if (untexted) throw new InvalidIdentifier(untexted);
  const l = deps.limits;
  const count: Check[] = [
    { key: keys.sendIdentifier(projectId, identifier, clientAddress), limit: l.sendsPerIdentifier },
    { key: keys.sendAddress(projectId, clientAddress), limit: l.sendsPerAddress },
  ];
  const spender = subjectKeys(binding);
  if (spender) count.push({ key: spender.send, limit: l.sendsPerAccount });
  // From a known place of the identifier, the project's ceiling, the identifier's sends and wrong
  // codes from everywhere are not counted or checked: strangers exhaust them. The known place's
  // own budget is counted instead: per identifier, from all its known places together, and per
  // project, a second ceiling as large as the first.
  count.push({ key: keys.sendKnownIdentifier(projectId, identifier), limit: l.knownPlaceSendsPerIdentifier, at: "known places" });
  const ceiling = identifier.kind === "phone" ? l.smsPerProject : l.emailsPerProject;
  // Ceilings count only a send every narrower limit allowed: counted with those, the identifier's
  // sends from everywhere were reached by one address sending 61 times, 56 of them refused at its
  // own limit (29th review), and its owner got no code at a new place for the hour.
  const ceilings: Check[] = [
    { key: keys.sendIdentifierAll(projectId, identifier), limit: l.sendsPerIdentifierAll, at: "unknown places" },
    { key: keys.sendProject(projectId, identifier.kind), limit: ceiling, at: "unknown places" },
    { key: keys.sendKnownProject(projectId, identifier.kind), limit: ceiling, at: "known places" },
  ];
  const peek: Check[] = [
    { key: keys.failIdentifier(projectId, identifier, clientAddress), limit: l.failuresPerSubject },
    { key: keys.failIdentifierAll(projectId, identifier), limit: l.failuresPerIdentifier, at: "unknown places" },
  ];
  const { state, code } = newOtpState(deps.otpKey, binding, identifier);
  const unlessOwnedBy = notOwnedBy && { projectId, accountId: notOwnedBy.accountId, identifier };
  const knownPlaces = placeIds(projectId, identifier, placesHere(clientAddress));
  const { counters, owned, stateWritten } = await countAndWrite(deps.db, { count, ceilings, peek, otpState: state, unlessOwnedBy, knownPlaces });
  if (owned) throw notOwnedBy!.refuse();
  await raiseAlarms(deps, projectId, counters, clientAddress, identifier.kind);
  refuseIfOver(counters);
  if (!stateWritten) throw new Error("the OTP state was not written although no limit refused");
  const stateId = state.id;
  try {
    await deps.messenger.send({
      to: identifier,
      subject,
      text: `Your code is ${code}. It expires in 10 minutes. If you did not ask for it, ignore this message.`,
      code,
    });
  } catch (err) {
    // Nobody can use a code that was not sent (the caller never learns the state's id). The
    // counters stay spent: they are what bounds the requests to the transport.
    await deps.prisma.otpState.deleteMany({ where: { id: stateId } });
    throw notSent(deps, identifier, err);
  }
  recordOtpSend(identifier.kind);
  return { stateId };
}

/** How long a caller is told to wait when the e-mail or SMS transport failed. */
const TRANSPORT_RETRY_AFTER_SECONDS = 30;

/**
 * A send that failed, as the caller is told: a recipient the transport refused for good is bad
 * input (400 InvalidIdentifier: a number that cannot take texts, an address the mail server
 * refuses), anything else an outage of the transport (503, logged for the operator). Both
 * were a 500 (docs/security.md, "Input, tenants and pages").
 */
function notSent(deps: Deps, identifier: Contact, err: unknown): Error {
  if (err instanceof RecipientRefused) {
    recordOtpSendFailure(identifier.kind, "refused");
    return new InvalidIdentifier(identifier.kind === "phone" ? "that phone number cannot receive texts" : "that e-mail address does not accept mail");
  }
  recordOtpSendFailure(identifier.kind, "unavailable");
  deps.logger.error({ err, channel: identifier.kind }, "a code could not be sent");
  return new ServiceUnavailable(TRANSPORT_RETRY_AFTER_SECONDS, "the code could not be sent; try again shortly");
}

/**
 * One security event per tripped ceiling and window: `tripped` is true only for the request
 * that took a counter just past its limit, and the counter's row lock makes that one request.
 */
async function raiseAlarms(deps: Deps, projectId: string, counters: Counter[], clientAddress: string, channel: Identifier["kind"]) {
  const tripped = counters.flatMap((c) => {
    const alarm = c.tripped ? ALARMS.find(([prefix]) => c.key.startsWith(prefix)) : undefined;
    return alarm ? [{ reason: alarm[1], retryAfter: c.resetsIn }] : [];
  });
  if (!tripped.length) return;
  await transaction(deps.prisma, async (tx) => {
    for (const t of tripped) {
      await enqueue(tx, {
        projectId,
        eventType: "security.suspicious_activity",
        data: { reason: t.reason, channel, client_address: clientAddress, retry_after_seconds: t.retryAfter },
      });
    }
  });
  deps.logger.warn({ projectId, reasons: tripped.map((t) => t.reason), clientAddress }, "send ceiling reached");
}

export async function verifyOtp(deps: Deps, binding: OtpBinding, stateId: unknown, otp: unknown, clientAddress: string): Promise<CheckedOtp> {
  const fields = requireCodeFields(stateId, otp);
  // The subject's wrong codes (a re-authentication's session) are read and counted in its turn,
  // by the statement that judges the code (otp_judge): read before it and counted after, verifies
  // of states for different identifiers sent at once were all judged before any was counted.
  const subject = subjectKeys(binding);
  const failures = subject && { key: subject.fail, limit: deps.limits.failuresPerSubject };
  // Guesses spread over many addresses: once the identifier took its hourly wrong codes, a code
  // is not judged (except from where it signed in before). The guard rides in the statement
  // that judges the code; only a code that was not judged asks why, so a sign-in costs nothing more.
  const places = placesHere(clientAddress);
  const guard = {
    ...identifierCap(deps),
    places,
    address: addressCap(deps, clientAddress),
    subject: failures && { key: failures.key, max: failures.limit.max, windowSeconds: failures.limit.windowSeconds },
  };
  try {
    return await checkOtp(deps.prisma, deps.otpKey, binding, fields.stateId, fields.otp, guard);
  } catch (err) {
    if (!(err instanceof OTPInvalid)) throw err;
    if (!(err as WrongCode).identifier) {
      await refuseIfCapped(deps, binding, fields.stateId, places, guard.address, failures ? await readCounters(deps.db, [failures]) : []);
    }
    await onWrongCode(deps, binding, fields.stateId, err as WrongCode, clientAddress);
    throw err;
  }
}

/**
 * The identifier-wide wrong-code cap for a verify decided in one statement (src/auth/sign-in.sql):
 * the counter's key prefix and maximum; the statement reads the counter as refuseIfCapped does.
 */
export function identifierCapGuard(deps: Deps): { fail_prefix: string; fail_max: number; fail_window: number } {
  const { prefix, max, windowSeconds } = identifierCap(deps);
  return { fail_prefix: prefix, fail_max: max, fail_window: windowSeconds };
}

/** The identifier-wide wrong-code cap: its counter's key prefix, maximum and window. */
function identifierCap(deps: Deps): { prefix: string; max: number; windowSeconds: number } {
  const { max, windowSeconds } = deps.limits.failuresPerIdentifier;
  return { prefix: FAIL_IDENTIFIER, max, windowSeconds };
}

/**
 * The wrong codes an identifier takes from one client address group, judged when a code is
 * (src/auth/sign-in.sql sign_in_address_capped reads keys.failIdentifier's counter), not only
 * before one is sent: states opened first would each take their tries.
 */
export function addressCap(deps: Deps, clientAddress: string): { group: string; max: number; windowSeconds: number } {
  const { max, windowSeconds } = deps.limits.failuresPerSubject;
  return { group: addressGroup(clientAddress), max, windowSeconds };
}

/** addressCap as sign_in_verify's fields. */
export function addressCapGuard(deps: Deps, clientAddress: string): { address_group: string; address_max: number; address_window: number } {
  const { group, max, windowSeconds } = addressCap(deps, clientAddress);
  return { address_group: group, address_max: max, address_window: windowSeconds };
}

/** The statement did not judge the code because the identifier is capped: counted as a refusal, answered RateLimited. */
export function refuseCapped(retryAfter: number): never {
  recordRateLimitRefusal("wrong_codes_per_identifier");
  throw new RateLimited(Math.max(1, retryAfter));
}

/**
 * A code that was not judged: RateLimited when that was the subject's wrong codes (`subject`, as
 * read), the identifier-wide cap or this address's wrong codes. When several refuse, the wait is
 * the longest of theirs (docs/security.md, "Abuse limits"): the first one found was told, and the
 * caller came back while another still refused, as sign_in_verify's and link_verify's callers did
 * before them.
 */
async function refuseIfCapped(deps: Deps, binding: OtpBinding, stateId: string, places: string[], address: { group: string; max: number }, subject: Counter[]): Promise<void> {
  const [identifierWide, fromAddress] = await Promise.all([
    stateIdentifierCapped(deps.db, binding.projectId, stateId, FAIL_IDENTIFIER, deps.limits.failuresPerIdentifier, places),
    stateAddressCapped(deps.db, binding.projectId, stateId, address),
  ]);
  const capped = identifierWide !== null || fromAddress !== null;
  const subjectOver = subject.filter((c) => c.over);
  if (!capped && !subjectOver.length) return;
  if (capped) recordRateLimitRefusal("wrong_codes_per_identifier");
  recordRefusals(subjectOver);
  throw new RateLimited(Math.max(identifierWide ?? 1, fromAddress ?? 1, ...subjectOver.map((c) => c.resetsIn)));
}

type WrongCode = OTPInvalid & { exhausted?: boolean; identifier?: Identifier };

/**
 * The OTP rules of a verify that its caller decides in one statement with the change it makes
 * (linking's link_verify): that statement peeks `failKey` (refusing at `failMax`), does not
 * judge a code for an identifier over its hourly wrong codes unless from one of its known
 * places (`cap`, as checkOtp's guard), counts the try under the state's row lock with `hash`
 * and `maxTries` exactly as checkOtp does, and then
 * reports through refuseForWrongCodes / wrongCode. Null when the input cannot be a code at all:
 * verifyOtp then gives the usual answer.
 */
export type VerifyInStatement = {
  stateId: string;
  hash: string;
  maxTries: number;
  failKey: string;
  failMax: number;
  /** The window of `failKey`: a wrong code is counted against it in the statement that judged it (otp_judge). */
  failWindow: number;
  /** The identifier-wide cap, judged there as sign_in_verify judges it (src/auth/sign-in.sql sign_in_capped). */
  cap: { prefix: string; max: number; windowSeconds: number; places: string[]; knownDays: number };
  /** The identifier's wrong codes from this address group (sign_in_address_capped). */
  address: { group: string; max: number; windowSeconds: number };
};

export function verifyInStatement(
  deps: Deps,
  binding: OtpBinding & { accountId: string },
  stateId: unknown,
  otp: unknown,
  clientAddress: string,
): VerifyInStatement | null {
  if (typeof stateId !== "string" || typeof otp !== "string" || !stateId || !isSixDigits(otp)) return null;
  return checkInStatement(deps, binding, stateId, otp, clientAddress);
}

/** The same rules for a code that is not typed by a person (an external sign-in's one-time code). */
export function checkInStatement(deps: Deps, binding: OtpBinding & { accountId: string }, stateId: string, code: string, clientAddress: string): VerifyInStatement {
  return {
    stateId,
    hash: codeHash(deps.otpKey, stateId, code),
    maxTries: OTP_MAX_TRIES,
    failKey: subjectKeys(binding)!.fail,
    failMax: deps.limits.failuresPerSubject.max,
    failWindow: deps.limits.failuresPerSubject.windowSeconds,
    cap: { ...identifierCap(deps), places: placesHere(clientAddress), knownDays: KNOWN_FOR_DAYS },
    address: addressCap(deps, clientAddress),
  };
}

/** The account's wrong codes reached the limit: counted as a refusal, answered RateLimited. */
export function refuseForWrongCodes(resetsIn: number): never {
  recordRateLimitRefusal("wrong_codes_per_account");
  throw new RateLimited(Math.max(1, resetsIn));
}

/** A wrong code, already counted against its state: counted against the subjects too, then OTPInvalid. */
export async function wrongCode(deps: Deps, binding: OtpBinding, stateId: string, identifier: Identifier, tries: number, clientAddress: string): Promise<never> {
  const err: WrongCode = Object.assign(new OTPInvalid(), { exhausted: tries >= OTP_MAX_TRIES, identifier });
  await onWrongCode(deps, binding, stateId, err, clientAddress);
  throw err;
}

// Wrong codes count against the account or session (checked when every code is judged) and
// against the identifier at this address group (checked before every send and every verify), so
// opening many states buys no extra guesses, and a stranger's guesses block the owner only where
// the stranger is: in the owner's own address group (a shared IPv4 address, the same IPv6 /64),
// for the rest of the hour (docs/security.md, "Wrong codes"). All of them were counted by the
// statement that judged the code (src/auth/sign-in.sql otp_judge), in the subject's and the
// identifier's turn, and only for a code a state judged: made-up state ids, which no state
// judged, used to count against the account, so a stale token could post fifteen of them and
// lock its owner out of linking for an hour (31st review).
async function onWrongCode(deps: Deps, binding: OtpBinding, stateId: string, err: WrongCode, clientAddress: string) {
  if (!err.identifier) return;
  // the wrong code that reached the identifier-wide cap: the project hears of it once an hour
  const identifierWide = { key: keys.failIdentifierAll(binding.projectId, err.identifier), limit: deps.limits.failuresPerIdentifier };
  await raiseAlarms(deps, binding.projectId, await readCounters(deps.db, [identifierWide]), clientAddress, err.identifier.kind);
  if (!err.exhausted) return;
  await transaction(deps.prisma, (tx) =>
    enqueue(tx, {
      projectId: binding.projectId,
      eventType: "security.suspicious_activity",
      data: {
        reason: "otp_attempts_exhausted",
        purpose: binding.purpose,
        state_id: stateId,
        client_address: clientAddress,
        ...(binding.accountId ? { user_id: binding.accountId } : {}),
      },
    }),
  );
}
