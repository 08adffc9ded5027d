-- Keys created before the split keep working as secret keys: the column's default fills them in.
-- CreateEnum
CREATE TYPE "api_key_kind" AS ENUM ('secret', 'publishable');

-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN     "kind" "api_key_kind" NOT NULL DEFAULT 'secret';
