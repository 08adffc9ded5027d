-- An external sign-in confirmed with the code sent to a merged secondary's e-mail (or with the
-- secondary's passkey) joins the primary, the account its owner uses, and remembers the
-- secondary's address that proved it: an unmerge gives it back to the secondary with that
-- address (src/linking/service.ts). Before, it stayed on the primary after the unmerge, so the
-- secondary's owner's sign-in kept landing in the other account. No foreign key: the address may
-- be removed later, and an id that is gone matches nothing. The index serves the unmerge's
-- lookup by the secondary's addresses, and holds almost nothing (most identities are proven by
-- their own sign-in).
-- AlterTable
ALTER TABLE "external_identities" ADD COLUMN "proven_by" TEXT;

-- CreateIndex
CREATE INDEX "external_identities_proven_by_idx" ON "external_identities"("proven_by");
