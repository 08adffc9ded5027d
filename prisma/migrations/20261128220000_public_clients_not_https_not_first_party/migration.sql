-- A public client with a redirect URI that is not https (an app's private-use scheme, a loopback
-- address) can no longer be first-party (src/oidc/clients.ts checkFirstParty): any app on the
-- device may claim that scheme, or any program listen on that port, sign the user in on the
-- genuine page and take a code whose tokens manage the account (23rd and 26th reviews). Such
-- clients made before become third-party here: their users see the consent page, and their
-- tokens reach userinfo only from their next call on (docs/operations.md, upgrade notes).
UPDATE "oauth_clients" SET "first_party" = false, "updated_at" = CURRENT_TIMESTAMP
  WHERE "first_party" AND "type" = 'public'
    AND EXISTS (SELECT 1 FROM unnest("redirect_uris") AS u(uri) WHERE lower(u.uri) NOT LIKE 'https:%');
