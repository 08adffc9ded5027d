// What a client holds for users: its grants (each bound to the linkgate session its sign-in made,
// src/oidc/interaction.ts), and the codes and tokens issued under them (src/oidc/adapter.ts).
import type { Tx } from "../db/client.ts";
import { endSessions } from "../auth/sessions.ts";

/**
 * Ends what a client holds, for one account or for all: its grants, their codes and tokens, and
 * the sessions they are bound to, so its access tokens stop working at their next call. Returns
 * how many grants there were.
 */
export async function endGrants(tx: Tx, of: { clientId: string; accountId?: string }): Promise<number> {
  const account = of.accountId ?? null;
  const grants = await tx.$queryRaw<{ session_id: string | null }[]>`
    DELETE FROM oidc_payloads WHERE kind = 'Grant' AND payload->>'clientId' = ${of.clientId}
      AND (${account}::text IS NULL OR payload->>'accountId' = ${account}::text)
    RETURNING session_id`;
  await tx.$executeRaw`
    DELETE FROM oidc_payloads WHERE kind <> 'Grant' AND payload->>'clientId' = ${of.clientId}
      AND (${account}::text IS NULL OR payload->>'accountId' = ${account}::text)`;
  for (const g of grants) if (g.session_id) await endSessions(tx, { id: g.session_id });
  return grants.length;
}
