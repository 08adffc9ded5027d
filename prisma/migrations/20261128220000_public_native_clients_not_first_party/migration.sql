-- A public client with an app's private-use scheme among its redirect URIs can no longer be
-- first-party (src/oidc/clients.ts checkFirstParty): any app on the device may claim that scheme,
-- sign the user in on the genuine page and take a code whose tokens manage the account (23rd
-- review). Such clients made before become third-party here: their users see the consent page,
-- and their tokens reach userinfo only from their next call on (docs/operations.md, upgrade
-- notes). Loopback addresses are refused on new first-party public clients in production only,
-- which a migration cannot tell: the upgrade notes ask production operators to check theirs.
UPDATE "oauth_clients" SET "first_party" = false, "updated_at" = CURRENT_TIMESTAMP
  WHERE "first_party" AND "type" = 'public'
    AND EXISTS (SELECT 1 FROM unnest("redirect_uris") AS u(uri) WHERE lower(u.uri) NOT LIKE 'https:%' AND lower(u.uri) NOT LIKE 'http:%');
