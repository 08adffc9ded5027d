-- Something sealed under the master key the database was set up with, written by the first
-- gateway or worker to start (src/auth/master-key.ts checkMasterKey). Before, the check opened
-- the newest signing key or a webhook's secret, and a database no gateway had started on held
-- neither: a worker started there with another key passed, then failed every delivery once a
-- gateway sealed its secrets with the right one (26th review). One row, id 1.
-- CreateTable
CREATE TABLE "master_key_check" (
    "id" INTEGER NOT NULL DEFAULT 1,
    "sealed" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "master_key_check_pkey" PRIMARY KEY ("id")
);
