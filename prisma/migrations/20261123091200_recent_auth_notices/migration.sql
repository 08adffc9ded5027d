-- CreateEnum
CREATE TYPE "notice_status" AS ENUM ('pending', 'sent', 'failed');

-- AlterEnum
ALTER TYPE "otp_purpose" ADD VALUE 'reauth';

-- AlterTable
ALTER TABLE "otp_states" ADD COLUMN     "session_id" TEXT;

-- AlterTable
ALTER TABLE "sessions" ADD COLUMN     "auth_method" TEXT NOT NULL DEFAULT 'otp',
ADD COLUMN     "auth_time" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
ADD COLUMN     "client_address" TEXT,
ADD COLUMN     "last_used_at" TIMESTAMP(3),
ADD COLUMN     "user_agent" TEXT;

-- CreateTable
CREATE TABLE "notices" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "kind" "identifier_kind" NOT NULL,
    "value" TEXT NOT NULL,
    "subject" TEXT NOT NULL,
    "text" TEXT NOT NULL,
    "status" "notice_status" NOT NULL DEFAULT 'pending',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_error" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "sent_at" TIMESTAMP(3),

    CONSTRAINT "notices_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "notices_next_attempt_at_idx" ON "notices"("next_attempt_at");

-- Sessions from before this migration last authenticated when they were created.
UPDATE "sessions" SET "auth_time" = "created_at";

-- The notice sender reads only pending notices, oldest due first.
DROP INDEX "notices_next_attempt_at_idx";
CREATE INDEX "notices_due_idx" ON "notices" ("next_attempt_at") WHERE status = 'pending';
