// The merge bookkeeping. Both accounts of a merge point at each other; the unique index on
// merged_with_id plus the `merged_with_id IS NULL` guards make "an account takes part in at
// most one merge" hold whatever processes race, and the CHECK constraint refuses a
// half-written merge.
import type { Tx } from "../db/client.ts";

export class MergeConflict extends Error {
  readonly code = "40001"; // retried by transaction(): the state moved under us
}

export async function markMerged(tx: Tx, primaryId: string, secondaryId: string): Promise<void> {
  const n = await tx.$executeRaw`
    UPDATE accounts SET
      merged_with_id = CASE WHEN id = ${primaryId} THEN ${secondaryId} ELSE ${primaryId} END,
      merge_role = (CASE WHEN id = ${primaryId} THEN 'primary' ELSE 'secondary' END)::merge_role,
      merged_at = now(),
      -- the secondary keeps its own updated_at, so unmerge restores it exactly as it was
      updated_at = CASE WHEN id = ${primaryId} THEN now() ELSE updated_at END
    WHERE id IN (${primaryId}, ${secondaryId}) AND merged_with_id IS NULL`;
  if (n !== 2) throw new MergeConflict("an account of this merge is already merged");
}

export async function clearMerge(tx: Tx, primaryId: string, secondaryId: string): Promise<void> {
  await tx.$executeRaw`
    UPDATE accounts SET merged_with_id = NULL, merge_role = NULL, merged_at = NULL,
      updated_at = CASE WHEN id = ${primaryId} THEN now() ELSE updated_at END
    WHERE id IN (${primaryId}, ${secondaryId})`;
}
