-- Issue 15, expand only: a new table that no earlier build reads or writes, so it can be
-- applied while the previous build keeps serving. The sweeper records here, per project, the
-- highest event seq it has removed, which lets the events pull tell an expired cursor from a
-- quiet project.
-- CreateTable
CREATE TABLE "event_retention" (
    "project_id" TEXT NOT NULL,
    "swept_seq" BIGINT NOT NULL,
    "swept_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "event_retention_pkey" PRIMARY KEY ("project_id")
);
