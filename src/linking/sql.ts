// The merge bookkeeping. Both accounts of a merge point at each other; the unique index on
// merged_with_id plus the `merged_with_id IS NULL` guard of link_verify's merge make "an
// account takes part in at most one merge" hold whatever processes race, and the CHECK
// constraint refuses a half-written merge.
import type { Database, Tx } from "../db/client.ts";
import { prepared, run } from "../db/fast.ts";

export async function clearMerge(tx: Tx, primaryId: string, secondaryId: string): Promise<void> {
  await tx.$executeRaw`
    UPDATE accounts SET merged_with_id = NULL, merge_role = NULL, merged_at = NULL,
      updated_at = CASE WHEN id = ${primaryId} THEN now() ELSE updated_at END
    WHERE id IN (${primaryId}, ${secondaryId})`;
}

/**
 * What link_verify (migration 20261123100100_link_verify_function) decided. `outcome` is one of:
 * rate_limited (retry_after), invalid (no live state, no replay), replay (stored), wrong (tries,
 * id_kind, id_value), gone, ended, a refusal's error name, attached or merged (stored).
 */
export type LinkVerifyRow = {
  outcome: string;
  tries: number | null;
  id_kind: string | null;
  id_value: string | null;
  retry_after: number | null;
  stored: string | null;
};

export const LINK_VERIFY = prepared<LinkVerifyRow>(
  "link_verify",
  { outcome: "text", tries: "int4", id_kind: "text", id_value: "text", retry_after: "int4", stored: "text" },
  `SELECT outcome, tries, id_kind, id_value, retry_after, stored FROM link_verify(
     $1::text, $2::text, $3::text, $4::text, $5::int, $6::text, $7::int, $8::text, $9::text[], $10::text, $11::text, $12::text,
     $13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::text, $20::text)`,
);

export async function runLinkVerify(db: Pick<Database, "driver">, values: unknown[]): Promise<LinkVerifyRow> {
  const [row] = await run(db, LINK_VERIFY, values);
  return row;
}
