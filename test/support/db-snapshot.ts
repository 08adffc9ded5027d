// What "changes nothing" means for a rejected request: every row of every table a request can
// write, as a count and a hash per table, in one query. Rate-limit counters are left out on
// purpose: a rejected request may still count against a limit.
import type { Database } from "../../src/db/client.ts";

export const SNAPSHOT_TABLES = [
  "projects",
  "api_keys",
  "accounts",
  "identifiers",
  "otp_states",
  "sessions",
  "webhooks",
  "outbox_events",
  "deliveries",
  "delivery_attempts",
] as const;

export type DbSnapshot = Record<string, { rows: number; hash: string }>;

const SQL = SNAPSHOT_TABLES.map(
  (t) => `SELECT '${t}' AS name, count(*)::int AS rows, md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) AS hash FROM ${t} t`,
).join(" UNION ALL ");

export async function dbSnapshot(db: Pick<Database, "prisma">): Promise<DbSnapshot> {
  const rows = await db.prisma.$queryRawUnsafe<{ name: string; rows: number; hash: string }[]>(SQL);
  return Object.fromEntries(rows.map((r) => [r.name, { rows: r.rows, hash: r.hash }]));
}
