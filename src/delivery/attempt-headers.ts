// The headers an attempt sent, shown in the delivery log: rebuilt from the event, the attempt's
// time and the secrets that signed it (only their references are stored, never a signature).
// The caller comes as an actor: only the project's secret key reads the delivery log
// (docs/webhooks.md), and its project is in the WHERE clause, so another project's attempts are
// simply not found.
import { unseal, type MasterKey } from "../crypto.ts";
import type { Database } from "../db/client.ts";
import { requireSecretKey, type KeyActor } from "../deps.ts";
import { requestHeaders, secretRef } from "./sender.ts";

type DbLike = Pick<Database, "prisma">;

type AttemptSource = {
  id: string;
  attempt: number;
  started_at: Date;
  signed_with: string | null;
  request_headers: Record<string, string> | null;
  event_id: string;
  event_type: string;
  body: string;
  secret_sealed: string;
  previous_secret_sealed: string | null;
};

/** In place of a signature made with a secret the webhook no longer holds (rotated out since). */
export const SIGNATURE_NOT_SHOWN = "(not shown: signed with a secret this webhook no longer holds)";

/**
 * The request headers of attempts of one project's deliveries, for display, by attempt id.
 * Attempts store only which secrets signed (signed_with): the headers are a function of the
 * body, the event, the attempt number, the start time (the signature timestamp) and those
 * secrets, so they are rebuilt here, byte for byte what was sent as long as the webhook still
 * holds the secrets (a signature by a secret rotated out since shows SIGNATURE_NOT_SHOWN).
 * Attempts logged before that column keep the headers they stored; one that made no request
 * has none ({}). Ids of other projects are not found (absent from the map).
 */
export async function attemptRequestHeaders(
  db: DbLike,
  masterKey: MasterKey,
  actor: KeyActor,
  attemptIds: readonly string[],
): Promise<Map<string, Record<string, string>>> {
  const { projectId } = requireSecretKey(actor);
  const ids = [...new Set(attemptIds)];
  if (ids.length === 0) return new Map();
  const rows = await db.prisma.$queryRaw<AttemptSource[]>`
    SELECT a.id, a.attempt, a.started_at, a.signed_with, a.request_headers, d.event_id, d.event_type, e.body,
           w.secret_sealed, w.previous_secret_sealed
    FROM delivery_attempts a
    JOIN deliveries d ON d.id = a.delivery_id
    JOIN outbox_events e ON e.id = d.event_id
    JOIN webhooks w ON w.id = d.webhook_id
    WHERE a.id = ANY (${ids}::text[]) AND d.project_id = ${projectId}`;
  // Each webhook's secrets are unsealed once, not once per attempt row: a page of deliveries
  // with their attempts names the same few secrets thousands of times.
  const secrets = new Map<string, string>(); // ref -> secret, of the webhooks involved
  const sealedSeen = new Set<string>();
  for (const r of rows) {
    for (const sealed of [r.secret_sealed, r.previous_secret_sealed]) {
      if (!sealed || sealedSeen.has(sealed)) continue;
      sealedSeen.add(sealed);
      const plain = unseal(masterKey, sealed);
      secrets.set(secretRef(plain), plain);
    }
  }
  return new Map(rows.map((r) => [r.id, r.request_headers ?? (r.signed_with ? rebuiltHeaders(r, r.signed_with.split(" "), secrets) : {})]));
}

function rebuiltHeaders(r: AttemptSource, refs: string[], secrets: Map<string, string>): Record<string, string> {
  // A secret no longer held is stood in for by a throw-away one, whose signatures are then blanked.
  const standIn = "whsec_" + Buffer.alloc(32).toString("base64");
  const [current, previous] = refs.map((ref) => secrets.get(ref) ?? null);
  const headers = requestHeaders({
    body: r.body,
    eventId: r.event_id,
    eventType: r.event_type,
    attempt: r.attempt,
    timestamp: Math.floor(r.started_at.getTime() / 1000),
    secrets: { current: current ?? standIn, previous: refs.length > 1 ? (previous ?? standIn) : null },
  });
  const entries = headers["webhook-signature"].split(" ");
  if (!current) {
    headers["X-Service-Signature"] = SIGNATURE_NOT_SHOWN;
    entries[0] = SIGNATURE_NOT_SHOWN;
  }
  if (refs.length > 1 && !previous) {
    headers["X-Service-Signature-Previous"] = SIGNATURE_NOT_SHOWN;
    entries[1] = SIGNATURE_NOT_SHOWN;
  }
  headers["webhook-signature"] = entries.join(" ");
  return headers;
}
