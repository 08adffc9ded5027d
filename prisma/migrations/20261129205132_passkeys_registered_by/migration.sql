-- The account that registered a passkey: its id (UTF-8) was the WebAuthn user.id given at
-- registration, and the authenticator returns it as the userHandle of every assertion, which
-- sign-in and re-authentication now compare with it (docs/authentication.md, passkeys). Kept
-- apart from account_id, which an unmerge of an earlier build changed when it gave a passkey to
-- the secondary: the authenticator still holds the primary's id. Null for passkeys registered before the
-- column, and left null by a build that does not know it during a rolling upgrade. Not filled in
-- here: while registered_with is set the passkey never moved and its account is the one, which
-- a sign-in reads as well, and otherwise an unmerge may have moved it and the row cannot tell.
-- AlterTable
ALTER TABLE "passkeys" ADD COLUMN "registered_by" TEXT;
