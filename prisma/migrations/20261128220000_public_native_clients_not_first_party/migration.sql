-- A public client with an app's private-use scheme among its redirect URIs can no longer be
-- first-party (src/oidc/clients.ts checkFirstParty): any app on the device may claim that scheme
-- or a loopback port, sign the user in on the genuine page and take a code whose tokens manage
-- the account (twenty-third review). Such clients made before become third-party here: their
-- users see the consent page, and their tokens reach userinfo only from their next call on
-- (docs/operations.md, upgrade notes).
UPDATE "oauth_clients" SET "first_party" = false, "updated_at" = CURRENT_TIMESTAMP
  WHERE "first_party" AND "type" = 'public'
    AND EXISTS (SELECT 1 FROM unnest("redirect_uris") AS u(uri) WHERE u.uri NOT LIKE 'https:%' AND u.uri NOT LIKE 'http:%');
