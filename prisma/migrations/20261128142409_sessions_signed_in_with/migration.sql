-- What a sign-in, and a session's last re-authentication, proved (an identifier, external ones
-- included, or a passkey), so that removing it, or unmerging the secondary it belongs to, ends
-- the sessions it opened or last re-authenticated (src/auth/sessions.ts). Someone who held a recent session could attach their own address or
-- passkey, sign in with it, and keep that session after the owner removed it. Null for older
-- sessions. The repeatable file src/auth/sign-in.sql writes it for code sign-ins, and a build
-- that does not know the column (during a rolling upgrade) leaves it null, as for an older session.
-- AlterTable
ALTER TABLE "sessions" ADD COLUMN     "reauthenticated_with" TEXT,
ADD COLUMN     "signed_in_with" TEXT;
