-- CreateEnum
CREATE TYPE "webauthn_purpose" AS ENUM ('registration', 'authentication');

-- CreateTable
CREATE TABLE "passkeys" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "account_id" TEXT NOT NULL,
    "credential_id" TEXT NOT NULL,
    "public_key" BYTEA NOT NULL,
    "counter" BIGINT NOT NULL DEFAULT 0,
    "transports" TEXT[],
    "device_type" TEXT NOT NULL,
    "backed_up" BOOLEAN NOT NULL,
    "name" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_used_at" TIMESTAMP(3),

    CONSTRAINT "passkeys_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "webauthn_challenges" (
    "challenge" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "purpose" "webauthn_purpose" NOT NULL,
    "account_id" TEXT,
    "session_id" TEXT,
    "expires_at" TIMESTAMP(3) NOT NULL,
    "consumed_at" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "webauthn_challenges_pkey" PRIMARY KEY ("challenge")
);

-- CreateIndex
CREATE INDEX "passkeys_account_id_idx" ON "passkeys"("account_id");

-- CreateIndex
CREATE UNIQUE INDEX "passkeys_project_id_credential_id_key" ON "passkeys"("project_id", "credential_id");

-- AddForeignKey
ALTER TABLE "passkeys" ADD CONSTRAINT "passkeys_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;
