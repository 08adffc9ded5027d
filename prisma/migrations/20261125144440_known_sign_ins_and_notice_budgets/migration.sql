-- AlterTable
ALTER TABLE "notices" ADD COLUMN     "account_id" TEXT;

-- CreateTable
CREATE TABLE "known_sign_ins" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "last_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "known_sign_ins_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "known_sign_ins_last_at_idx" ON "known_sign_ins"("last_at");
