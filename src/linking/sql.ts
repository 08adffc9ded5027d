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
 * The identifier a link state was issued for, by its id, project, account and session ($1 to
 * $4; a state of the previous build has none, src/linking/link-verify.sql): the verify reads it
 * before link_verify to make the events and notices it may write.
 */
export const LINK_STATE = prepared<{ kind: string; value: string }>(
  "link_state",
  { kind: "text", value: "text" },
  `SELECT kind::text AS kind, value FROM otp_states WHERE id = $1 AND project_id = $2 AND account_id = $3 AND (session_id = $4 OR session_id IS NULL) AND purpose = 'link'`,
);

/**
 * What link_verify (src/linking/link-verify.sql) decided. `outcome` is one of:
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

/** link_verify's one argument, as named jsonb fields (src/linking/link-verify.sql). */
export type LinkVerifyInput = {
  /** The checks: whose state, its code's hash, and the account's wrong-code limit. */
  project: string;
  account: string;
  /** The acting session, checked live under the account locks (absent: not checked). */
  session?: string;
  state: string;
  hash: string;
  max_tries: number;
  fail_key: string;
  fail_max: number;
  /** The account's window: a wrong code is counted against it in the statement that judged it (otp_judge). */
  fail_window: number;
  /**
   * The identifier-wide wrong-code cap (docs/security.md, "Abuse limits"): its counter's key
   * prefix and maximum, the request's places and how long a place stays known.
   */
  cap_prefix: string;
  cap_max: number;
  /** The cap's window: a wrong code is counted in the statement that judged it (wrong_code_counted). */
  cap_window: number;
  judge_places: string[];
  known_days: number;
  /** This request's address group and the wrong codes an identifier takes from one (sign_in_address_capped). */
  address_group: string;
  address_max: number;
  address_window: number;
  /** The id an attached identifier gets. */
  identifier_id: string;
  /** The ids of the (two) events either change writes, and the channel that wakes the workers. */
  event_ids: string[];
  channel: string;
  /** Placeholders in the bodies, replaced in SQL by the user object and the secondary's id. */
  user_mark: string;
  secondary_mark: string;
  attach_types: string[];
  attach_bodies: string[];
  merge_types: string[];
  merge_bodies: string[];
  /** The notices' subjects and texts: [0] attached, [1] merged, [2] merged away. */
  notice_subjects: string[];
  notice_texts: string[];
  /** What a success stores and a replay answers, per change. */
  attached_result: string;
  merged_result: string;
};

// One jsonb argument rather than 20 positional ones: each field is named where it is made and
// where it is read. Still one prepared statement, planned once per connection (src/db/fast.ts).
export const LINK_VERIFY = prepared<LinkVerifyRow>(
  "link_verify",
  { outcome: "text", tries: "int4", id_kind: "text", id_value: "text", retry_after: "int4", stored: "text" },
  `SELECT outcome, tries, id_kind, id_value, retry_after, stored FROM link_verify($1::jsonb)`,
);

export async function runLinkVerify(db: Pick<Database, "driver">, input: LinkVerifyInput): Promise<LinkVerifyRow> {
  const [row] = await run(db, LINK_VERIFY, [JSON.stringify(input)]);
  return row;
}
