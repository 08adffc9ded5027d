-- A passkey remembers what the session that registered it had proved last (an identifier or a
-- passkey of the account, by id). One registered by a session signed in with a merged
-- secondary's address goes back to the secondary on unmerge, with its sessions ended
-- (src/linking/service.ts separate). Before, it stayed on the primary, and whoever held the
-- secondary's address kept a way into the primary after the unmerge meant to cut it off (24th
-- review). Null for passkeys registered before the column, which stay where they are. No
-- foreign key: an id that is gone matches nothing. The index serves the unmerge's lookup.
-- AlterTable
ALTER TABLE "passkeys" ADD COLUMN     "registered_with" TEXT;

-- CreateIndex
CREATE INDEX "passkeys_registered_with_idx" ON "passkeys"("registered_with");
