-- Each identity provider comes back to a callback of its own, /auth/external/<id>/callback, and
-- a callback only finishes a flow of the provider its path names. With one callback shared by
-- every provider of the deployment, a flow was found by its state alone: a provider controlled
-- by an attacker (their own project's, or a rogue one) could receive an honest provider's code
-- that a victim's browser brought back with the attacker's state, and the attacker then
-- finished their own flow of the victim's project with it (a mix-up, RFC 9700 section 4.4).
-- The providers that exist keep the shared callback their registration at the provider names
-- (true for them, false for every provider made from now on) until an admin moves them
-- (docs/external-identities.md, "One callback per provider").
-- AlterTable
ALTER TABLE "identity_providers" ADD COLUMN "shared_callback" BOOLEAN NOT NULL DEFAULT true;
ALTER TABLE "identity_providers" ALTER COLUMN "shared_callback" SET DEFAULT false;
