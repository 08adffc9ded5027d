-- The retention sweep deletes the OpenID Connect provider's expired rows by this index.
-- oidc_payloads is new in the same release, so a plain (locking) build takes no time.
CREATE INDEX "oidc_payloads_expires_at_idx" ON "oidc_payloads"("expires_at");
