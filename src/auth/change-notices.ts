// "Was this you?" notices for every change to how an account can be signed into: identifiers
// attached, merged, removed or unmerged, passkeys added or removed. Each goes to every other
// identifier that signs into the account, says what changed, when and from which client
// address, and how to undo it; a new identifier is never shown in full. Queued in the change's
// own transaction (src/auth/notices.ts sends them, with retries, within their budgets).
//
// Nothing a user typed goes into a notice: it is sent under the operator's name, so a passkey
// named "Call +1 900 … to cancel" would be a phishing line the operator delivers for the
// attacker. A passkey is "a passkey"; identifiers appear masked (docs/security.md).
import type { Tx } from "../db/client.ts";
import type { Actor } from "../deps.ts";
import { maskIdentifier, queueNotices, type Notice } from "./notices.ts";
import { externalParts, isContact, type Identifier } from "./identifiers.ts";

export type AccountChange =
  | { kind: "attached"; identifier: Identifier }
  | { kind: "merged"; identifier: Identifier }
  | { kind: "merged_away" }
  | { kind: "removed"; identifier: Identifier }
  | { kind: "unmerged"; secondaryId: string }
  /** `name` is the user's and never shown */
  | { kind: "passkey_added"; name?: string }
  | { kind: "passkey_removed"; name?: string };

const cap = (s: string) => s[0].toUpperCase() + s.slice(1);
const noun = (i: Identifier) => (i.kind === "email" ? "an e-mail address" : i.kind === "phone" ? "a phone number" : "a sign-in with another service");

/**
 * An identifier as a notice shows it: masked, and an external one by its provider's host name
 * only. The issuer whole (up to 2,048 characters, its path any text) went into the notice
 * twice: a single text of some 4,000 characters (60 paid SMS segments) where a gathered one
 * keeps within MAX_GATHERED_LENGTH, and the path's words told to the account's owner under the
 * service's name (docs/external-identities.md, "Removing and unmerging").
 */
function shown(i: Identifier): string {
  if (isContact(i)) return maskIdentifier(i);
  return `an account at ${providerHost(externalParts(i.value).issuer) || "another service"}`;
}

/** An issuer's host (stored issuers are URLs), at most as long as a DNS name (253), which a URL's host is not held to. */
function providerHost(issuer: string): string {
  try {
    return new URL(issuer).host.slice(0, 253);
  } catch {
    return "";
  }
}

function describe(change: AccountChange): { subject: string; what: string; undo: string } {
  switch (change.kind) {
    case "attached":
      return {
        subject: `${cap(noun(change.identifier))} was added to your account`,
        what: `${cap(noun(change.identifier))}, ${shown(change.identifier)}, was added to your account. Whoever holds it can now sign in to your account.`,
        undo: `sign in, end your other sessions, and remove ${shown(change.identifier)} from your account`,
      };
    case "merged":
      return {
        subject: "Another account was merged into your account",
        what: `The account of ${shown(change.identifier)} was merged into your account. Its addresses and passkeys now sign in to your account.`,
        undo: "sign in, end your other sessions, and unmerge the accounts",
      };
    case "merged_away":
      return {
        subject: "Your account was merged into another account",
        what: "Your account was merged into another account: signing in with your addresses and passkeys now lands on that account.",
        undo: "contact the service's support at once; until the accounts are separated, the other account's owner controls yours",
      };
    case "removed":
      return {
        subject: `${cap(noun(change.identifier))} was removed from your account`,
        what: `${shown(change.identifier)} was removed from your account and no longer signs in to it.`,
        undo: "sign in, end your other sessions, and add it again",
      };
    case "unmerged":
      return {
        subject: "Your account was separated from the account it was merged with",
        what: "Two accounts that were merged were separated again; each signs in on its own.",
        undo: "sign in, end your other sessions, and link the other account again",
      };
    case "passkey_added":
      return {
        subject: "A passkey was added to your account",
        what: "A passkey was added to your account. It can sign in to your account.",
        undo: "sign in, end your other sessions, and remove the passkey",
      };
    case "passkey_removed":
      return {
        subject: "A passkey was removed from your account",
        what: "A passkey was removed from your account.",
        undo: "sign in and end your other sessions",
      };
  }
}

/**
 * The client address of a change support staff made on the user's behalf (src/linking/support.ts):
 * its notices say who acted rather than the address of the tool support used, which told users
 * that a stranger's machine had separated their accounts (33rd review).
 */
export const SUPPORT_STAFF = "support";

/** `clientAddress` null: the notice says when, not from where (announce's `leaving`). */
export function noticeText(change: AccountChange, at: Date, clientAddress: string | null): { subject: string; text: string } {
  const { subject, what, undo } = describe(change);
  const when = at.toISOString().replace("T", " ").slice(0, 16) + " UTC";
  const from = clientAddress === null ? "" : ` From: ${clientAddress === "local" ? "this service itself" : clientAddress === SUPPORT_STAFF ? "the service's support staff" : clientAddress}.`;
  return {
    subject,
    // texts have no subject line, so the body starts with it
    text: [
      `${subject}.`,
      `${what}`,
      `When: ${when}.${from}`,
      `If this was you, there is nothing to do.`,
      `If it was not you: ${undo}.`,
    ].join("\n"),
  };
}

/** Every identifier that signs into the account: its own and attached ones, and its merged secondary's. */
export async function signInIdentifiers(tx: Tx, accountId: string): Promise<Identifier[]> {
  // One definition with link_verify's notices, and an index-only path (src/auth/sign-in-identifiers.sql).
  return tx.$queryRaw<Identifier[]>`SELECT kind::text AS kind, value FROM account_sign_in_identifiers(${accountId})`;
}

/** The account's own and attached identifiers (not its merged secondary's). */
export async function identifiersOf(tx: Tx, accountId: string): Promise<Identifier[]> {
  const rows = await tx.identifier.findMany({ where: { accountId }, select: { kind: true, value: true } });
  return rows.map((r) => ({ kind: r.kind, value: r.value }));
}

const same = (a: Identifier, b: Identifier) => a.kind === b.kind && a.value === b.value;

/** Every identifier but `except`, each once. */
export function others(ids: Identifier[], except?: Identifier): Identifier[] {
  return ids.filter((r, i, all) => (!except || !same(r, except)) && all.findIndex((o) => same(o, r)) === i);
}

/**
 * Queues the notices of one change, to be sent after it commits: call inside the change's
 * transaction with the identifiers to tell.
 */
export async function announce(tx: Tx, actor: Actor, change: AccountChange, recipients: Identifier[], leaving: Identifier[] = []): Promise<void> {
  const at = new Date();
  const told = noticeText(change, at, actor.clientAddress);
  // Whoever holds what is leaving the account (an address removed, the other side of an
  // unmerge) learns what happened and when, not from where: an owner removing an intruder's
  // address, or undoing a merge forced on them, sent the intruder their client address (30th review).
  const toLeaving = noticeText(change, at, null);
  // an external identifier cannot be written to
  const notices: Notice[] = others(recipients)
    .filter(isContact)
    .map((to) => ({ to, ...(leaving.some((l) => same(l, to)) ? toLeaving : told) }));
  await queueNotices(tx, actor.projectId, notices, actor.user?.accountId);
}
