// What proved what on an account. An identifier attached by link remembers what its linking
// session had proved last (identifiers.linked_with), a passkey what its registering session had
// (passkeys.registered_with), an external identity the address or passkey that confirmed it
// (external_identities.proven_by). An unmerge follows these from the merged secondary's own
// identifiers and passkeys, and removes from the primary all it reaches there
// (provenThroughSecondary below, which the unmerge in src/linking/service.ts calls;
// docs/security.md "Sessions").
import type { Tx } from "../db/client.ts";
import type { Identifier } from "./identifiers.ts";

/**
 * Before an identifier or passkey leaves `accountId`: what was proven with it now counts as proven
 * with what proved it (`itsProof`), so the chain an unmerge follows stays whole. Removing a middle
 * link cut it, and what hung from it (an address attached, a passkey registered, by a session
 * signed in with the removed one) stayed on the primary as the owner's own (27th review).
 */
export async function handOnProofs(tx: Tx, accountId: string, removedId: string, itsProof: string | null): Promise<void> {
  // the session making the removal is kept (the others signed in with it were ended): what it
  // adds next is proven with what proved the removed one, not with an id that matches nothing
  await tx.session.updateMany({ where: { accountId, signedInWith: removedId }, data: { signedInWith: itsProof } });
  await tx.session.updateMany({ where: { accountId, reauthenticatedWith: removedId }, data: { reauthenticatedWith: itsProof } });
  await tx.identifier.updateMany({ where: { accountId, linkedWith: removedId }, data: { linkedWith: itsProof } });
  await tx.passkey.updateMany({ where: { accountId, registeredWith: removedId }, data: { registeredWith: itsProof } });
  await tx.externalIdentity.updateMany({ where: { provenBy: removedId, identifier: { accountId } }, data: { provenBy: itsProof } });
}

type Proven = { id: string; what: "own" | "identifier" | "passkey"; kind: string | null; value: string | null };

/**
 * What an unmerge removes from the primary: what was proven through the secondary's own
 * identifiers and passkeys while merged (those never left the secondary, and stay with it). The external identities that joined it
 * confirmed through the secondary's address (src/auth/external/sign-in.ts joinOnce); the
 * identifiers attached and the passkeys registered by sessions that had proved them last
 * (`linkedWith`, `registeredWith`). Whoever held the secondary's address kept a way into the
 * primary otherwise: a passkey (24th review), or an address attached first and a passkey
 * registered from a session signed in with it (26th). Handed to the secondary, they gave it what
 * it never had; removed, the secondary comes back exactly as it was. Followed to the end, in one
 * statement (src/auth/proofs.sql says why). `proofs`: all of it with the secondary's own, whose
 * sessions on the primary end.
 */
export async function provenThroughSecondary(tx: Tx, primaryId: string, secondaryId: string) {
  const rows = await tx.$queryRaw<Proven[]>`SELECT id, what, kind, value FROM proven_through_secondary(${primaryId}, ${secondaryId})`;
  const onPrimary = rows.filter((r) => r.what !== "own");
  return {
    identifiers: onPrimary.filter((r) => r.what === "identifier").map((r) => ({ id: r.id, kind: r.kind as Identifier["kind"], value: r.value! })),
    passkeys: onPrimary.filter((r) => r.what === "passkey").map((r) => r.id),
    proofs: rows.map((r) => r.id),
  };
}
