-- Sign-in with external identity providers (docs/external-identities.md). Only additions: a
-- new enum value, a nullable column and new tables, so the build before this one keeps working.

-- CreateEnum
CREATE TYPE "identity_provider_preset" AS ENUM ('oidc', 'google', 'apple', 'microsoft', 'gitlab', 'github');

-- AlterEnum
ALTER TYPE "identifier_kind" ADD VALUE 'external';

-- AlterEnum
ALTER TYPE "otp_purpose" ADD VALUE 'external_confirm';

-- AlterTable
ALTER TABLE "otp_states" ADD COLUMN     "external_flow_id" TEXT;

-- CreateTable
CREATE TABLE "identity_providers" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "slug" TEXT NOT NULL,
    "preset" "identity_provider_preset" NOT NULL,
    "display_name" TEXT NOT NULL,
    "issuer" TEXT NOT NULL,
    "client_id" TEXT NOT NULL,
    "client_secret" TEXT,
    "scopes" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "identity_providers_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "external_flows" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "provider_id" TEXT NOT NULL,
    "purpose" TEXT NOT NULL,
    "account_id" TEXT,
    "session_id" TEXT,
    "redirect_uri" TEXT NOT NULL,
    "state_hash" TEXT NOT NULL,
    "nonce" TEXT NOT NULL,
    "code_verifier" TEXT NOT NULL,
    "code_hash" TEXT,
    "issuer" TEXT,
    "subject" TEXT,
    "email" TEXT,
    "email_verified" BOOLEAN,
    "name" TEXT,
    "result" JSONB,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMP(3) NOT NULL,
    "consumed_at" TIMESTAMP(3),

    CONSTRAINT "external_flows_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "external_identities" (
    "identifier_id" TEXT NOT NULL,
    "provider_id" TEXT,
    "email" TEXT,
    "email_verified" BOOLEAN,
    "name" TEXT,
    "updated_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "external_identities_pkey" PRIMARY KEY ("identifier_id")
);

-- CreateIndex
CREATE UNIQUE INDEX "identity_providers_project_id_slug_key" ON "identity_providers"("project_id", "slug");

-- CreateIndex
CREATE UNIQUE INDEX "external_flows_state_hash_key" ON "external_flows"("state_hash");

-- CreateIndex
CREATE INDEX "external_flows_expires_at_idx" ON "external_flows"("expires_at");

-- AddForeignKey
ALTER TABLE "identity_providers" ADD CONSTRAINT "identity_providers_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "external_flows" ADD CONSTRAINT "external_flows_provider_id_fkey" FOREIGN KEY ("provider_id") REFERENCES "identity_providers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "external_identities" ADD CONSTRAINT "external_identities_identifier_id_fkey" FOREIGN KEY ("identifier_id") REFERENCES "identifiers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "external_identities" ADD CONSTRAINT "external_identities_provider_id_fkey" FOREIGN KEY ("provider_id") REFERENCES "identity_providers"("id") ON DELETE SET NULL ON UPDATE CASCADE;
