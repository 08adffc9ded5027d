// The databases a run creates on the Postgres server (all dropped at the end), what it reads
// from the server about them (backends' CPU, HOT updates, commits), and the backlogs it seeds.
// The seeding also runs in the PGlite child, against its own in-memory database.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import pg from "pg";
import type { MasterKey } from "../../src/crypto.ts";
import { openDatabase, type Database } from "../../src/db/client.ts";
import { DELIVERY_CHANNEL } from "../../src/webhooks/outbox.ts";
import { seedWebhook } from "../../test/support/receiver.ts";
import { HOOKS, sleep, type Ctx } from "./shared.ts";

export const serverUrl = () => process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";

export function withDatabase(name: string): string {
  const u = new URL(serverUrl());
  u.pathname = `/${name}`;
  return u.toString();
}

export async function admin<T extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: serverUrl() });
  await client.connect();
  try {
    return (await client.query<T>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

/** Databases this run created; all dropped at the end. */
export const created: string[] = [];
export async function createDatabase(prefix: string, template?: string): Promise<string> {
  const name = `${prefix}_${randomBytes(4).toString("hex")}`;
  // A template must have no sessions: end any that linger (e.g. a migration connection closing late).
  if (template) await admin(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [template]);
  await admin(`CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ""}`);
  created.push(name);
  return name;
}

/**
 * Updates of `deliveries` in the database at `url` so far, and how many were HOT. The workers'
 * backends report theirs when they end (or idle, at most once a second): read after stopping them.
 */
export async function deliveryUpdates(url: string): Promise<{ upd: number; hot: number }> {
  await sleep(1_100);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ upd: string; hot: string }>(`SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE relname = 'deliveries'`);
    return { upd: Number(rows[0]?.upd ?? 0), hot: Number(rows[0]?.hot ?? 0) };
  } finally {
    await client.end();
  }
}

/** CPU seconds used so far by each backend connected to `database` (empty where /proc is not readable). */
export async function backendCpu(database: string): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  for (const { pid } of await admin<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = $1`, [database])) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.set(pid, (Number(f[11]) + Number(f[12])) / 100); // utime + stime, in USER_HZ (100 on Linux)
    } catch {
      // not Linux, or the backend just ended
    }
  }
  return out;
}

// ---- child processes ---------------------------------------------------------------------------

/** fn's result, and the CPU seconds the backends connected to `database` used meanwhile (null: /proc not readable). */
export async function withDbCpu<T>(database: string, fn: () => Promise<T>): Promise<[T, number | null]> {
  const commits = process.env.BENCH_DELIVERY_COMMITS ? await committed(database) : 0;
  const before = await backendCpu(database);
  const result = await fn();
  const after = await backendCpu(database);
  if (process.env.BENCH_DELIVERY_COMMITS) console.error(`[bench delivery] ${database}: ${(await committed(database)) - commits} transactions committed during the run`);
  if (after.size === 0) return [result, null];
  let s = 0;
  for (const [pid, t] of after) s += t - (before.get(pid) ?? 0);
  return [result, s];
}

/**
 * Transactions committed in `database` so far (BENCH_DELIVERY_COMMITS=1 prints them per run: a
 * claim and a record are one each, so per drained event they show how large the batches were).
 * Backends report their counts when idle, at most once a second: wait for that first.
 */
export async function committed(database: string): Promise<number> {
  await new Promise((r) => setTimeout(r, 1_500));
  const [row] = await admin<{ n: string }>(`SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = $1`, [database]);
  return Number(row?.n ?? 0);
}

// ---- backlogs ----------------------------------------------------------------------------------

/** HOOKS webhooks of one project pointing at the receiver, disabled until a run starts. */
export type Backlog = { db: Database; projectId: string; hookIds: string[] };
export type OursDb = Backlog & { name: string; url: string };

export async function seedHooks(db: Database, masterKey: MasterKey, url: string): Promise<Backlog> {
  const first = await seedWebhook(db, masterKey, { url, enabled: false });
  const hookIds = [first.webhookId];
  for (let i = 1; i < HOOKS; i++) hookIds.push((await seedWebhook(db, masterKey, { url, projectId: first.projectId, enabled: false })).webhookId);
  return { db, projectId: first.projectId, hookIds };
}

/** A copy of the migrated template with HOOKS webhooks (disabled) pointing at the receiver. */
export async function oursDatabase(ctx: Ctx): Promise<OursDb> {
  const name = await createDatabase("lg_bench_ours", ctx.template);
  const url = withDatabase(name);
  const db = await openDatabase({ databaseUrl: url, dataDir: "", poolSize: 4 });
  return { name, url, ...(await seedHooks(db, ctx.masterKey, ctx.receiver.url)) };
}

/** `count` events and their deliveries, round-robin over the webhooks, in one statement each `chunk`; then VACUUM ANALYZE and CHECKPOINT. */
export async function seedBacklog(o: Backlog, count: number, tag: string, chunk = count): Promise<number> {
  const t = performance.now();
  for (let done = 0, part = 0; done < count; done += chunk, part++) await insertBacklog(o, Math.min(chunk, count - done), count > chunk ? `${tag}${part}` : tag);
  await o.db.prisma.$executeRawUnsafe("VACUUM ANALYZE outbox_events");
  await o.db.prisma.$executeRawUnsafe("VACUUM ANALYZE deliveries");
  // Write the seed out now (superuser only; skipped otherwise): a backlog that built up over time
  // has long been checkpointed, while a fresh 1,000,000-row seed would otherwise be flushed by
  // the checkpointer during the measurement.
  await o.db.prisma.$executeRawUnsafe("CHECKPOINT").catch(() => {});
  return (performance.now() - t) / 1000;
}

export async function insertBacklog(o: Backlog, count: number, tag: string): Promise<void> {
  await o.db.prisma.$executeRaw`
    WITH ev AS (
      INSERT INTO outbox_events (id, project_id, event_type, body)
      SELECT 'evt_' || ${tag}::text || '_' || i, ${o.projectId}, 'user.created',
             json_build_object('id', 'evt_' || ${tag}::text || '_' || i, 'event_type', 'user.created',
                               'created_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                               'project_id', ${o.projectId}::text, 'data', json_build_object('user', json_build_object('user_id', 'acc_' || i)))::text
      FROM generate_series(1, ${count}::int) i
      RETURNING id, seq
    )
    INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type)
    SELECT 'dlv_' || substr(ev.id, 5), ev.id, (${o.hookIds}::text[])[(1 + ev.seq % ${HOOKS}::int)::int], ${o.projectId}, 'user.created'
    FROM ev`;
}

/** One statement: the webhooks' state and, when enabling, the NOTIFY that wakes the workers at commit. */
export async function setEnabled(o: Backlog, enabled: boolean): Promise<void> {
  await o.db.prisma.$queryRaw`
    WITH u AS (UPDATE webhooks SET enabled = ${enabled} WHERE id = ANY (${o.hookIds}::text[]) RETURNING 1)
    SELECT pg_notify(${DELIVERY_CHANNEL}, '')::text FROM (SELECT 1 FROM u LIMIT 1) AS x WHERE ${enabled}`;
}
