// What proved what on an account. An identifier attached by link remembers what its linking
// session had proved last (identifiers.linked_with), a passkey what its registering session had
// (passkeys.registered_with), an external identity the address or passkey that confirmed it
// (external_identities.proven_by). An unmerge follows these from the merged secondary's own
// identifiers and passkeys, and gives back all it reaches (src/linking/service.ts,
// docs/security.md "Sessions").
import type { Tx } from "../db/client.ts";

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
