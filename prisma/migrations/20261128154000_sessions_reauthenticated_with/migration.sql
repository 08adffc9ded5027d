-- What a session's last re-authentication proved (an identifier, external ones included, or a
-- passkey): removing it, or unmerging the secondary it belongs to, ends the session as it ends
-- the sessions signed in with it (src/auth/sessions.ts endSessionsSignedInWith). A session that
-- re-authenticated with an intruder's passkey kept its recent sign-in after the owner removed the
-- passkey. Since the same release, passkey and external sign-ins fill signed_in_with too (the
-- previous migration's note predates that). Null for sessions older than the column, and left
-- null by a build that does not know it during a rolling upgrade. IF NOT EXISTS: an unreleased
-- build added this column in the previous migration's file, and a database it migrated has it.
-- AlterTable
ALTER TABLE "sessions" ADD COLUMN IF NOT EXISTS "reauthenticated_with" TEXT;
