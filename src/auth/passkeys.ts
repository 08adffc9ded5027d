// Passkeys (WebAuthn, docs/authentication.md, passkeys). @simplewebauthn/server does every check of the
// ceremonies (signature, origin, RP id, challenge, flags); this module keeps the challenges
// server-side (single use, 5 minutes, bound to the project and, for a registration, to the
// account) and ties credentials to accounts the way identifiers are tied: a passkey belongs to
// the account that registered it, and signing in with it lands on that account's primary.
import type { AuthenticationResponseJSON, AuthenticatorTransport, RegistrationResponseJSON } from "@simplewebauthn/server";
import { z } from "zod";
import type { Config } from "../config.ts";
import type { Db, Tx } from "../db/client.ts";
import { DecideAgain, transaction } from "../db/transaction.ts";
import { enqueue, enqueueAll } from "../webhooks/outbox.ts";
import type { Actor, Deps, UserActor } from "../deps.ts";
import { InvalidRequest, NotFound, PasskeyInvalid, RateLimited, ReauthenticationRequired } from "../errors.ts";
import { isIdShaped, newId } from "../ids.ts";
import { loadAccount, preferred, userEventData } from "./accounts.ts";
import { announce, signInIdentifiers } from "./change-notices.ts";
import { consumePerAccount, consumePerAddress, type Limit } from "../rate-limit.ts";
import { requireRecentAuth } from "./recent-auth.ts";
import { handOnProofs } from "./proofs.ts";
import { endSessionsSignedInWith, lockForSession, markReauthenticated } from "./sessions.ts";
import { holderPrimaryOf, issueTokens, reissueTokens, startSession, type TokenResponse } from "./sign-in.ts";
import { charLength, nameText, unshowable } from "../text.ts";

/**
 * @simplewebauthn/server, loaded at the first passkey ceremony: with the certificate parsers it
 * brings (@peculiar/*, tsyringe, asn1js) it was about 330 of the 1,900 module files a gateway
 * read before it answered (counted with strace), and a worker, the CLI or a gateway where no one
 * uses a passkey never needs it.
 */
let library: Promise<typeof import("@simplewebauthn/server") & typeof import("@simplewebauthn/server/helpers")> | undefined;
function webauthn() {
  return (library ??= Promise.all([import("@simplewebauthn/server"), import("@simplewebauthn/server/helpers")]).then(([server, helpers]) => ({ ...server, ...helpers })));
}

export const CHALLENGE_TTL_MS = 5 * 60 * 1000;

export type RelyingParty = { id: string; name: string; origins: string[] };

/**
 * What each operation refuses with, besides bad credentials: its REST route and its GraphQL field
 * both list exactly these.
 */
export const PASSKEY_ERRORS = {
  startRegistration: [ReauthenticationRequired, NotFound, RateLimited, InvalidRequest],
  finishRegistration: [PasskeyInvalid, InvalidRequest],
  startSignIn: [RateLimited],
  finishSignIn: [PasskeyInvalid],
  reauthenticate: [PasskeyInvalid],
  rename: [NotFound, InvalidRequest],
  remove: [NotFound, ReauthenticationRequired],
};

/** The RP id and origins: configured, or the issuer's (a loopback IP becomes "localhost", which browsers accept). */
export function relyingParty(config: Config, issuer: string): RelyingParty {
  const url = new URL(issuer);
  const loopback = ["127.0.0.1", "[::1]", "::1"].includes(url.hostname);
  const id = config.webauthnRpId ?? (loopback ? "localhost" : url.hostname);
  const origins = config.webauthnOrigins.length
    ? config.webauthnOrigins
    : loopback
      ? [url.origin, `${url.protocol}//localhost${url.port ? `:${url.port}` : ""}`]
      : [url.origin];
  return { id, name: "linkgate", origins };
}

const rp = (deps: Deps) => relyingParty(deps.config, deps.keys.issuer);

// The outer shape only; everything inside is checked by the library.
const b64url = z.string().min(1).max(16_384).regex(/^[A-Za-z0-9_-]+$/);
const registrationSchema = z.object({
  id: b64url,
  rawId: b64url,
  type: z.literal("public-key"),
  response: z.looseObject({ clientDataJSON: b64url, attestationObject: b64url, transports: z.array(z.string().max(32)).max(10).optional() }),
  clientExtensionResults: z.record(z.string(), z.unknown()).optional().default({}),
  authenticatorAttachment: z.string().max(32).optional(),
});
const authenticationSchema = z.object({
  id: b64url,
  rawId: b64url,
  type: z.literal("public-key"),
  response: z.looseObject({ clientDataJSON: b64url, authenticatorData: b64url, signature: b64url, userHandle: b64url.optional() }),
  clientExtensionResults: z.record(z.string(), z.unknown()).optional().default({}),
  authenticatorAttachment: z.string().max(32).optional(),
});

function parseResponse<T>(schema: z.ZodType<T>, raw: unknown): T {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw new PasskeyInvalid("the passkey response is malformed");
  return parsed.data;
}

/**
 * What a challenge this gateway issued looks like: base64url (the library's options give 32
 * random bytes, 43 characters). The challenge in clientDataJSON is whatever the client wrote; one
 * with a NUL in it reached the lookup below, which Postgres refuses to compare, and every passkey
 * ceremony, sign-in included, answered a stranger's made-up response with a 500.
 */
const ISSUED_CHALLENGE = /^[A-Za-z0-9_-]{1,512}$/;

/** The challenge the browser signed, read from clientDataJSON (the library checks it again). */
async function signedChallenge(clientDataJSON: string, type: "webauthn.create" | "webauthn.get"): Promise<string> {
  const { decodeClientDataJSON } = await webauthn();
  try {
    const data = decodeClientDataJSON(clientDataJSON);
    if (data.type !== type || typeof data.challenge !== "string") throw new Error("wrong ceremony");
    if (!ISSUED_CHALLENGE.test(data.challenge)) throw new Error("never issued");
    return data.challenge;
  } catch {
    throw new PasskeyInvalid("the passkey response is malformed");
  }
}

type ChallengeBinding = { projectId: string; purpose: "registration" | "authentication"; accountId?: string; sessionId?: string };

/**
 * A challenge lives CHALLENGE_TTL_MS by the database's clock, written and checked there: the
 * gateway that issues it and the one that finishes the ceremony may differ, and with their own
 * clocks one running ahead and one behind let a challenge (and a registration started on a recent
 * sign-in) last minutes longer (docs/operations.md, "Clocks").
 */
async function storeChallenge(db: Db, challenge: string, binding: ChallengeBinding) {
  await db.$executeRaw`
    INSERT INTO webauthn_challenges (challenge, project_id, purpose, account_id, session_id, expires_at, created_at)
    VALUES (${challenge}, ${binding.projectId}, ${binding.purpose}::webauthn_purpose, ${binding.accountId ?? null}, ${binding.sessionId ?? null},
            (now() + make_interval(secs => ${CHALLENGE_TTL_MS / 1000}::int)) AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC')`;
}

/**
 * Uses up a challenge issued to this project (and account) for this ceremony. Consumed before
 * the response is verified: a challenge is good for one attempt, right or wrong, so a captured
 * response can never be replayed.
 */
async function consumeChallenge(db: Db, challenge: string, binding: ChallengeBinding) {
  // a registration is finished by the session whose recent sign-in started it
  const count = await db.$executeRaw`
    UPDATE webauthn_challenges SET consumed_at = now() AT TIME ZONE 'UTC'
    WHERE challenge = ${challenge} AND project_id = ${binding.projectId} AND purpose = ${binding.purpose}::webauthn_purpose
      AND account_id IS NOT DISTINCT FROM ${binding.accountId ?? null}::text
      AND (${binding.sessionId ?? null}::text IS NULL OR session_id = ${binding.sessionId ?? null})
      AND consumed_at IS NULL AND expires_at > now()`;
  if (count !== 1) throw new PasskeyInvalid("that passkey challenge is unknown, used or expired; start again");
}

/**
 * Registration options store a challenge each too, and one code buys a signed-in stranger an
 * account of their own to ask with: 2,000 in 46 s from one address before this bound. 30 in 10
 * minutes is far more than a person retrying a passkey prompt needs.
 */
export const REGISTRATION_OPTIONS_PER_ACCOUNT: Limit = { max: 30, windowSeconds: 600 };

/**
 * Passkeys one account holds at most: far more than the devices and security keys a person
 * keeps, and a bound on the rows an unmerge follows (src/auth/proofs.sql): each passkey
 * registered from a session signed in with the one before is a link of that chain, and
 * registering needs no mailbox. Checked when registration starts, so that no authenticator stores
 * a passkey the account cannot take (they are discoverable credentials), and again under the
 * account's lock when it finishes. An account can hold more (those from before the cap); it
 * registers none until it holds fewer.
 */
export const PASSKEYS_PER_ACCOUNT = 20;

/** The longest credential id a registration takes (WebAuthn §7.1, docs/authentication.md). */
export const MAX_CREDENTIAL_ID_BYTES = 1023;

const TOO_MANY_PASSKEYS = `an account holds at most ${PASSKEYS_PER_ACCOUNT} passkeys: remove one first`;

export async function startPasskeyRegistration(deps: Deps, actor: UserActor) {
  // Checked when registration starts; finishing a challenge issued now needs no fresh check.
  await requireRecentAuth(deps, actor);
  const { projectId, user } = actor;
  await consumePerAccount(deps.db, "registration_options_per_account", user.accountId, REGISTRATION_OPTIONS_PER_ACCOUNT);
  const account = await loadAccount(deps.prisma, projectId, user.accountId);
  if (!account) throw new NotFound("no such account");
  const existing = await deps.prisma.passkey.findMany({ where: { accountId: account.id }, select: { credentialId: true, transports: true } });
  if (existing.length >= PASSKEYS_PER_ACCOUNT) throw new InvalidRequest(TOO_MANY_PASSKEYS);
  const label = preferred(account.identifiers, "email")?.value ?? preferred(account.identifiers, "phone")?.value ?? account.id;
  const party = rp(deps);
  const options = await (await webauthn()).generateRegistrationOptions({
    rpName: party.name,
    rpID: party.id,
    userName: label,
    userDisplayName: account.name ?? label,
    userID: new TextEncoder().encode(account.id),
    attestationType: "none",
    excludeCredentials: existing.map((p) => ({ id: p.credentialId, transports: p.transports as AuthenticatorTransport[] })),
    // discoverable credentials: signing in needs no identifier typed
    authenticatorSelection: { residentKey: "required", userVerification: "preferred" },
  });
  await storeChallenge(deps.prisma, options.challenge, { projectId, purpose: "registration", accountId: account.id, sessionId: user.sessionId });
  return options;
}

export type PasskeyView = { id: string; name: string; createdAt: Date; lastUsedAt: Date | null; deviceType: string; backedUp: boolean };

function passkeyName(name: unknown): string {
  if (name === undefined || name === null) return "Passkey";
  // counted in characters as people count them, in NFC, as stored (src/text.ts)
  const named = typeof name === "string" ? nameText(name) : "";
  if (!named || charLength(named) > 100) throw new InvalidRequest("a passkey's name is 1 to 100 characters");
  // shown on the operator's dashboard beside the account's other facts (src/text.ts)
  const why = unshowable(named);
  if (why) throw new InvalidRequest(`a passkey's name ${why}`);
  return named;
}

export async function finishPasskeyRegistration(deps: Deps, actor: UserActor, input: { response: unknown; name?: unknown }): Promise<PasskeyView> {
  const name = passkeyName(input.name);
  const response = parseResponse(registrationSchema, input.response) as RegistrationResponseJSON;
  const challenge = await signedChallenge(response.response.clientDataJSON, "webauthn.create");
  await consumeChallenge(deps.prisma, challenge, { projectId: actor.projectId, purpose: "registration", accountId: actor.user.accountId, sessionId: actor.user.sessionId });
  const party = rp(deps);
  const verified = await (await webauthn()).verifyRegistrationResponse({
    response,
    expectedChallenge: challenge,
    expectedOrigin: party.origins,
    expectedRPID: party.id,
    requireUserVerification: false,
  }).catch(() => null);
  if (!verified?.verified || !verified.registrationInfo) throw new PasskeyInvalid();
  const { credential, credentialDeviceType, credentialBackedUp } = verified.registrationInfo;
  // WebAuthn §7.1 (Level 3), "verify that the credentialId is ≤ 1023 bytes": the library takes
  // any length authData declares (up to 65,535), and an attestation of 12 KB carried one the
  // unique index on (project_id, credential_id) could not hold (2,704 bytes an entry): a 500.
  if (Buffer.from(credential.id, "base64url").byteLength > MAX_CREDENTIAL_ID_BYTES) throw new PasskeyInvalid("that passkey's credential id is longer than 1023 bytes");
  return transaction(deps.prisma, async (tx) => {
    // a merge (or a deletion) that ended the session while the ceremony ran goes first: a passkey
    // added to a merged secondary would sign in to its primary (24th review)
    const { lastProof } = await lockForSession(tx, actor);
    const taken = await tx.passkey.count({ where: { projectId: actor.projectId, credentialId: credential.id } });
    if (taken) throw new PasskeyInvalid("that passkey is already registered");
    const held = await tx.passkey.count({ where: { accountId: actor.user.accountId } });
    if (held >= PASSKEYS_PER_ACCOUNT) throw new InvalidRequest(TOO_MANY_PASSKEYS);
    const passkey = await tx.passkey.create({
      data: {
        id: newId("psk"),
        projectId: actor.projectId,
        accountId: actor.user.accountId,
        credentialId: credential.id,
        publicKey: Buffer.from(credential.publicKey),
        counter: BigInt(credential.counter),
        transports: credential.transports ?? [],
        deviceType: credentialDeviceType,
        backedUp: credentialBackedUp,
        name,
        // what made the session recent: a passkey added by whoever signed in with a merged
        // secondary's address is removed on unmerge (src/linking/service.ts)
        registeredWith: lastProof,
        // the userID of the options above (the challenge bound them to this account): what
        // every assertion's userHandle must name
        registeredBy: actor.user.accountId,
      },
    });
    await enqueue(tx, {
      projectId: actor.projectId,
      eventType: "user.passkey.registered",
      data: await userEventData(tx, actor.projectId, actor.user.accountId, {
        passkey: { id: passkey.id, name: passkey.name, created_at: passkey.createdAt.toISOString() },
      }),
    });
    await announce(tx, actor, { kind: "passkey_added", name: passkey.name }, await signInIdentifiers(tx, actor.user.accountId));
    return passkey;
  }).finally(() => deps.notices.kick());
}

/**
 * Sign-in options need no credentials and each one stores a challenge row, so they are bounded
 * per client address. 60 in 10 minutes is far more than a person retrying a passkey prompt
 * needs (and than an office behind one address uses at once), and keeps one client from
 * filling the table: that was 1,000 rows in 4.4 s before.
 */
export const SIGN_IN_OPTIONS_PER_ADDRESS: Limit = { max: 60, windowSeconds: 600 };

export async function startPasskeySignIn(deps: Deps, actor: Actor) {
  await consumePerAddress(deps.db, "sign_in_options_per_address", actor.clientAddress, SIGN_IN_OPTIONS_PER_ADDRESS);
  const party = rp(deps);
  const options = await (await webauthn()).generateAuthenticationOptions({ rpID: party.id, userVerification: "preferred", allowCredentials: [] });
  await storeChallenge(deps.prisma, options.challenge, { projectId: actor.projectId, purpose: "authentication" });
  return options;
}

type Verified = { passkey: { id: string; accountId: string; name: string; counter: bigint } };

const NOT_REGISTERED = "that passkey is not registered here";

/**
 * The account whose id (UTF-8) was the user.id given to the authenticator when the passkey was
 * registered (startPasskeyRegistration), which it returns as each assertion's userHandle. Stored
 * since registered_by was added; for a passkey registered before, the account that holds it
 * while registered_with is set: only an unmerge of an earlier build moved a passkey, and it
 * cleared registered_with (unmerges now remove, never move, what they separate).
 * Null when it cannot be known: a passkey from before registered_with, or one an unmerge of an
 * older build moved (it then holds the secondary, but its authenticator the primary's id).
 */
function registeringAccount(passkey: { accountId: string; registeredWith: string | null; registeredBy: string | null }): string | null {
  return passkey.registeredBy ?? (passkey.registeredWith !== null ? passkey.accountId : null);
}

/**
 * A userHandle, when the authenticator gives one, must name the account that registered the
 * passkey (docs/authentication.md, passkeys). The passkey is found by its credential id, never by
 * the handle, so a credential that answers for another account is a mix-up, or a client that
 * rewrote the handle (no signature covers it), and is refused as a passkey not registered here.
 * When the registering account is unknown, a handle shaped like an account id (linkgate never
 * gave anything else as user.id) is taken at its word and returned, to be remembered once the
 * assertion has passed, so that the assertions after it are checked.
 */
function checkUserHandle(passkey: Parameters<typeof registeringAccount>[0], userHandle: string | undefined): string | null {
  if (userHandle === undefined) return null;
  const handle = Buffer.from(userHandle, "base64url");
  const expected = registeringAccount(passkey);
  if (expected !== null) {
    if (!handle.equals(Buffer.from(expected, "utf8"))) throw new PasskeyInvalid(NOT_REGISTERED);
    return null;
  }
  const named = handle.toString("utf8");
  if (!isIdShaped(named, "acc")) throw new PasskeyInvalid(NOT_REGISTERED);
  return named;
}

/**
 * Checks an assertion against a project-bound sign-in challenge and the stored credential. The
 * library refuses a counter that did not grow, but silently: given 0 it checks nothing, and the
 * comparison happens here, after the signature proved the authenticator's word, so that a
 * cloned authenticator is reported.
 */
export async function verifyPasskeyAssertion(deps: Deps, actor: Actor, raw: unknown, check: { userVerified: boolean } = { userVerified: false }): Promise<Verified> {
  const { projectId } = actor;
  const response = parseResponse(authenticationSchema, raw) as AuthenticationResponseJSON;
  const challenge = await signedChallenge(response.response.clientDataJSON, "webauthn.get");
  await consumeChallenge(deps.prisma, challenge, { projectId, purpose: "authentication" });
  const passkey = await deps.prisma.passkey.findUnique({ where: { projectId_credentialId: { projectId, credentialId: response.id } } });
  if (!passkey) throw new PasskeyInvalid(NOT_REGISTERED);
  const party = rp(deps);
  const verified = await (await webauthn()).verifyAuthenticationResponse({
    response,
    expectedChallenge: challenge,
    expectedOrigin: party.origins,
    expectedRPID: party.id,
    credential: { id: passkey.credentialId, publicKey: new Uint8Array(passkey.publicKey), counter: 0, transports: passkey.transports as AuthenticatorTransport[] },
    requireUserVerification: check.userVerified,
  }).catch(() => null);
  if (!verified?.verified) throw new PasskeyInvalid(check.userVerified ? "the passkey did not verify, or did not verify its user (a PIN or biometrics)" : undefined);
  // after the signature: checked before it, a made-up assertion would tell from the message
  // which account a credential id belongs to; before the counter, so a refusal changes nothing
  const learned = checkUserHandle(passkey, response.response.userHandle);
  const counter = BigInt(verified.authenticationInfo.newCounter);
  const stored = await claimCounter(deps.prisma, passkey.id, counter);
  if (stored !== null) {
    await reportClonedPasskey(deps, projectId, { ...passkey, counter: stored }, counter, actor.clientAddress);
    throw new PasskeyInvalid("this passkey's signature counter went backwards; it may have been cloned");
  }
  if (learned !== null) await deps.prisma.passkey.updateMany({ where: { id: passkey.id, registeredBy: null }, data: { registeredBy: learned } });
  return { passkey };
}

/**
 * Checks and raises the stored counter in one conditional UPDATE, so that of two assertions
 * with the same counter presented at once (on any processes) exactly one passes: the other
 * waits on the row and then finds the counter already there. Authenticators that keep no
 * counter say 0 every time (WebAuthn §6.1.1): 0 over a stored 0 passes, as it always did.
 * Returns null when the assertion may sign in, else the counter it failed against.
 */
async function claimCounter(db: Db, passkeyId: string, seen: bigint): Promise<bigint | null> {
  const claimed = await db.$executeRaw`
    UPDATE passkeys SET counter = ${seen}::bigint, last_used_at = now() AT TIME ZONE 'UTC'
    WHERE id = ${passkeyId} AND (counter < ${seen}::bigint OR (counter = 0 AND ${seen}::bigint = 0))`;
  if (claimed === 1) return null;
  const row = await db.passkey.findUnique({ where: { id: passkeyId }, select: { counter: true } });
  if (!row) throw new PasskeyInvalid(NOT_REGISTERED); // removed meanwhile
  return row.counter;
}

export async function finishPasskeySignIn(deps: Deps, actor: Actor, input: { response: unknown }): Promise<TokenResponse> {
  const { passkey } = await verifyPasskeyAssertion(deps, actor, input.response);
  const { accountId, sessionId } = await transaction(deps.prisma, async (tx) => {
    const accountId = await lockPasskeyAccount(tx, actor.projectId, passkey.id);
    const sessionId = await startSession(
      tx,
      actor,
      accountId,
      "passkey",
      [
        ["user.passkey.login", { passkey: { id: passkey.id, name: passkey.name } }],
        ["user.authentication.success", { method: "passkey" }],
      ],
      passkey.id,
    );
    return { accountId, sessionId };
  });
  return issueTokens(deps, actor.projectId, accountId, sessionId);
}

/**
 * Re-authenticates the current session with a passkey that signs into its account (its own,
 * or its merged secondary's): the session and its `sid` stay, its auth_time moves. The
 * authenticator must have verified its user (a PIN or biometrics), not only been touched: a
 * re-authentication is asked for because the session alone is not trusted, and whoever sits at
 * the session's device may have its security key too (31st review). Sign-in keeps "preferred",
 * as the options say: a passkey there stands in for a code sent to a mailbox.
 */
export async function reauthenticateWithPasskey(deps: Deps, actor: UserActor, input: { response: unknown }): Promise<TokenResponse> {
  const { passkey } = await verifyPasskeyAssertion(deps, actor, input.response, { userVerified: true });
  await transaction(deps.prisma, async (tx) => {
    if ((await lockPasskeyAccount(tx, actor.projectId, passkey.id)) !== actor.user.accountId) throw new PasskeyInvalid("that passkey does not sign in to this account");
    await markReauthenticated(tx, actor, "passkey", passkey.id);
  });
  return reissueTokens(deps, actor);
}

async function reportClonedPasskey(deps: Deps, projectId: string, passkey: { id: string; accountId: string; counter: bigint }, seen: bigint, clientAddress: string) {
  await transaction(deps.prisma, (tx) =>
    enqueue(tx, {
      projectId,
      eventType: "security.suspicious_activity",
      data: {
        reason: "passkey_counter_regressed",
        user_id: passkey.accountId,
        passkey_id: passkey.id,
        stored_counter: Number(passkey.counter),
        presented_counter: Number(seen),
        client_address: clientAddress,
      },
    }),
  );
}

/**
 * The account a passkey signs in to (its owner's primary), locked (holderPrimaryOf), with the passkey
 * read again under that lock, which removePasskey and an unmerge take first. A passkey removed
 * while the sign-in was being checked (by the owner, or by an unmerge) is gone now and signs
 * nothing in: a sign-in that read it on the primary before an unmerge opened a session there
 * that nothing would end (30th review). One removed after this commits finds the session this
 * writes, and ends it
 * (docs/security.md, "Stolen sessions").
 */
export async function lockPasskeyAccount(tx: Tx, projectId: string, passkeyId: string): Promise<string> {
  const owner = await passkeyOwner(tx, passkeyId);
  const primary = await holderPrimaryOf(tx, projectId, owner);
  if ((await passkeyOwner(tx, passkeyId)) !== owner) throw new DecideAgain("the passkey moved to another account");
  return primary;
}

async function passkeyOwner(tx: Tx, passkeyId: string): Promise<string> {
  const row = await tx.passkey.findUnique({ where: { id: passkeyId }, select: { accountId: true } });
  if (!row) throw new PasskeyInvalid(NOT_REGISTERED);
  return row.accountId;
}

/**
 * A passkey that signs in to the caller's account, found within its project or not at all: the
 * account's own, or, while the account is a merge's primary, its merged secondary's, which sign
 * in here too (docs/authentication.md, passkeys). The user can see and remove every key to
 * their account without undoing the merge. Only ever asked with a passkey's id (passkeyOfCaller),
 * which its primary key answers: without one, no index answers the OR across the join (listPasskeys).
 */
function signingIntoCaller(actor: UserActor) {
  const { accountId } = actor.user;
  return { projectId: actor.projectId, OR: [{ accountId }, { account: { mergedWithId: accountId, mergeRole: "secondary" as const } }] };
}

const passkeyOfCaller = (actor: UserActor, id: string) => ({ id, ...signingIntoCaller(actor) });

export async function renamePasskey(deps: Deps, actor: UserActor, input: { id: string; name: unknown }) {
  // A rename names the passkey (docs/rest.md, "POST /auth/passkey/rename": 1 to 100 characters):
  // a REST body without `name` renamed it to the registration's default, "Passkey".
  if (input.name === undefined || input.name === null) throw new InvalidRequest("a passkey's name is 1 to 100 characters");
  const name = passkeyName(input.name);
  const renamed = await transaction(deps.prisma, async (tx) => {
    // a change made with the session: one ended while the request ran (its address removed by
    // the owner, a merge, a sign-out) renames nothing (docs/security.md, "Stolen sessions")
    await lockForSession(tx, actor);
    const { count } = await tx.passkey.updateMany({ where: passkeyOfCaller(actor, input.id), data: { name } });
    return count ? tx.passkey.findUnique({ where: { id: input.id } }) : null;
  });
  // none, or removed by another request between the two statements: not a 500
  if (!renamed) throw new NotFound("no such passkey");
  return renamed;
}

export async function removePasskey(deps: Deps, actor: UserActor, input: { id: string }) {
  await requireRecentAuth(deps, actor);
  await transaction(deps.prisma, async (tx) => {
    // first, as a sign-in with it locks it (lockPasskeyAccount): one of the two goes first
    await lockForSession(tx, actor);
    const passkey = await tx.passkey.findFirst({ where: passkeyOfCaller(actor, input.id), select: { name: true, registeredWith: true, accountId: true } });
    if (!passkey) throw new NotFound("no such passkey");
    await endSessionsSignedInWith(tx, actor.user.accountId, [input.id], actor.user.sessionId);
    await handOnProofs(tx, actor.user.accountId, input.id, await proofAfter(tx, actor.user.accountId, passkey));
    if (passkey.accountId !== actor.user.accountId) await handOnProofs(tx, passkey.accountId, input.id, passkey.registeredWith);
    await tx.passkey.delete({ where: { id: input.id } });
    await announce(tx, actor, { kind: "passkey_removed", name: passkey.name }, await signInIdentifiers(tx, actor.user.accountId));
    await tx.account.update({ where: { id: actor.user.accountId }, data: { updatedAt: new Date() } });
    const data = await userEventData(tx, actor.projectId, actor.user.accountId, { passkey_removed: { id: input.id } });
    await enqueueAll(tx, [{ projectId: actor.projectId, eventType: "user.updated", data }]);
  });
  deps.notices.kick();
  return { removedId: input.id };
}

/**
 * What proves, once passkey `removed` is gone, what it proved on account `me` (the sessions it
 * signed in, what they added: src/auth/proofs.ts handOnProofs). An own passkey hands on to what
 * registered it. A merged secondary's hands on to one of the secondary's own identifiers
 * (a merged secondary always keeps the one the merge proved), so that what it proved is still
 * proven through the secondary, and an unmerge still removes it from the primary.
 */
async function proofAfter(tx: Tx, me: string, removed: { accountId: string; registeredWith: string | null }): Promise<string | null> {
  if (removed.accountId === me) return removed.registeredWith;
  const own = await tx.identifier.findFirst({ where: { accountId: removed.accountId }, orderBy: { createdAt: "asc" }, select: { id: true } });
  return own?.id ?? removed.registeredWith;
}

const PASSKEY_VIEW = { id: true, name: true, createdAt: true, lastUsedAt: true, deviceType: true, backedUp: true } as const;

/**
 * The passkeys that sign in to the caller's account: its own, and its merged secondary's (as
 * signingIntoCaller, found from the accounts). The condition sits on accounts alone (the account
 * by its primary key, its secondary by the unique merged_with_id) and the passkeys are read
 * through their account_id index: signingIntoCaller's OR across the join is answered by no index,
 * and every passkey of every project was read per call (test/security.passkey-list-reads.test.ts;
 * src/auth/sign-in-identifiers.sql says the same of the identifiers).
 */
export async function listPasskeys(deps: Deps, actor: UserActor): Promise<{ own: PasskeyView[]; mergedSecondary: PasskeyView[] }> {
  const { accountId } = actor.user;
  const accounts = await deps.prisma.account.findMany({
    where: { projectId: actor.projectId, OR: [{ id: accountId }, { mergedWithId: accountId, mergeRole: "secondary" }] },
    select: { id: true, passkeys: { where: { projectId: actor.projectId }, orderBy: [{ createdAt: "asc" }, { id: "asc" }], select: PASSKEY_VIEW } },
  });
  const of = (mine: boolean) => accounts.filter((a) => (a.id === accountId) === mine).flatMap((a) => a.passkeys);
  return { own: of(true), mergedSecondary: of(false) };
}

export function passkeyJson(p: PasskeyView) {
  return {
    id: p.id,
    name: p.name,
    created_at: p.createdAt.toISOString(),
    last_used_at: p.lastUsedAt?.toISOString() ?? null,
    device_type: p.deviceType,
    backed_up: p.backedUp,
  };
}

