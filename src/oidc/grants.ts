// What a client holds for users: its grants (each bound to the linkgate session its sign-in made,
// src/oidc/interaction.ts), and the codes and tokens issued under them (src/oidc/adapter.ts).
import type { Tx } from "../db/client.ts";

/**
 * Ends what a client holds, for one account or for all: its grants, their codes and tokens, and
 * the sessions they are bound to, so its access tokens stop working at their next call. Returns
 * how many grants there were. The sessions end in the grants' own statement: one update per
 * grant ran a popular client's deletion (40,000 grants) past the transaction's 15 s, so it failed
 * and deleted nothing (26th review). `unconsented`: only what the consent page did not give it,
 * what it was given as a first-party app: a grant (code, token) stays only when the user's
 * remembered consent covers every scope it carries, as a sign-in now skips the page only then
 * (src/oidc/interaction.ts). A yes to `openid` alone kept the grant for `email phone
 * offline_access` the app got later as a first-party app without asking (34th review).
 */
export async function endGrants(tx: Tx, of: { clientId: string; accountId?: string; unconsented?: boolean }): Promise<number> {
  const account = of.accountId ?? null;
  const unconsented = of.unconsented ?? false;
  const [row] = await tx.$queryRaw<{ grants: number }[]>`
    WITH grants AS (
      DELETE FROM oidc_payloads g WHERE kind = 'Grant' AND payload->>'clientId' = ${of.clientId}
        AND (${account}::text IS NULL OR payload->>'accountId' = ${account}::text)
        AND (NOT ${unconsented} OR NOT EXISTS (
          SELECT 1 FROM oauth_consents c WHERE c.client_id = ${of.clientId} AND c.account_id = g.payload->>'accountId' AND c.revoked_at IS NULL
            AND string_to_array(g.payload->'openid'->>'scope', ' ') <@ c.scopes
            AND NOT EXISTS (SELECT 1 FROM jsonb_each_text(coalesce(g.payload->'resources', '{}'::jsonb)) r
                            WHERE NOT string_to_array(r.value, ' ') <@ c.scopes)))
      RETURNING session_id
    ), ended AS (
      UPDATE sessions SET ended_at = now() AT TIME ZONE 'UTC'
      WHERE id IN (SELECT session_id FROM grants) AND ended_at IS NULL
    )
    SELECT count(*)::int AS grants FROM grants`;
  await tx.$executeRaw`
    DELETE FROM oidc_payloads t WHERE kind <> 'Grant' AND payload->>'clientId' = ${of.clientId}
      AND (${account}::text IS NULL OR payload->>'accountId' = ${account}::text)
      AND (NOT ${unconsented} OR NOT EXISTS (
        SELECT 1 FROM oauth_consents c WHERE c.client_id = ${of.clientId} AND c.account_id = t.payload->>'accountId' AND c.revoked_at IS NULL
          AND string_to_array(coalesce(t.payload->>'scope', ''), ' ') <@ c.scopes))`;
  return row?.grants ?? 0;
}
