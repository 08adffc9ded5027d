-- Hand-written. Deleting an account now removes the apps its user allowed (src/auth/profile.ts,
-- deleteAccount). Before, nothing removed them but the deletion of the app itself, so every
-- account deleted until now left its consents behind for good, naming an account that no longer
-- exists (docs/oidc.md says a consent is kept until withdrawn, its app deleted, or its account
-- deleted). Those are removed here, once. The primary key leads with account_id, so each
-- consent is checked against accounts by its index.
DELETE FROM "oauth_consents" c
WHERE NOT EXISTS (SELECT 1 FROM "accounts" a WHERE a."id" = c."account_id");
