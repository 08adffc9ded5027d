-- Which identifier a code sign-in proved, so that removing it, or unmerging the secondary it
-- belongs to, ends the sessions it opened (src/linking/service.ts). Someone who held a recent
-- session could attach their own address, sign in with it, and keep that session after the owner
-- removed the address. Null for passkey and external sign-ins and for older sessions. The
-- repeatable file src/auth/sign-in.sql writes it, and a build that does not know the column (during
-- a rolling upgrade) leaves it null, as for an older session.
-- AlterTable
ALTER TABLE "sessions" ADD COLUMN     "signed_in_with" TEXT;
