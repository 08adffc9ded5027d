-- AlterTable
ALTER TABLE "rate_limits" ADD COLUMN     "window_seconds" INTEGER NOT NULL DEFAULT 60;
