// CPU per delivery of the engine's two hot statements, on their own: the claim (claimDue) and
// the recording of results (recordResults), in a loop of claim 50 → record 50 successes over a
// backlog of 10 webhooks, one call at a time, nothing else running against that database; and
// of adding the dashboard numbers the records staged (applyStaged, every APPLY_EVERY records).
//
// Node CPU = this process's CPU (process.cpuUsage) across each call (driver, parsing, building
// arguments). Database CPU = the CPU of every backend connected to the database across each
// call (from /proc, tick-sampled: only the sum over many calls means anything). Planning,
// execution, commit and WAL writes are all in it.
//
// `npx tsx bench/delivery-statements.ts [--backlog=20000] [--rounds=300]` on its own (it makes
// and drops its own database), or the `statements` part of `npm run bench -- delivery`.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import pg from "pg";
import { seal, type MasterKey } from "../src/crypto.ts";
import { openDatabase, type Database } from "../src/db/client.ts";
import { applyMigrations } from "../src/db/migrations.ts";
import * as sql from "../src/delivery/sql.ts";
import { newId, newOrderedId } from "../src/ids.ts";
import { enqueue } from "../src/webhooks/outbox.ts";
import type { Tx } from "../src/db/client.ts";
import { newMasterKey } from "../test/support/receiver.ts";

export type StatementCost = {
  statement: string;
  calls: number;
  deliveries: number;
  "node µs/delivery": number;
  "db µs/delivery": number;
  "ms/call": number;
  /** Of the UPDATEs of `deliveries` during the loop, the share that were HOT (same page, no index entries). */
  "HOT share of updates": string;
};

const HOOKS = 10;
const LIMIT = 50;
/** Records per apply of the staged dashboard numbers (~one second of a worker at ~1,000 deliveries/s). */
const APPLY_EVERY = 20;

/** CPU seconds used so far by each backend connected to `database`. */
async function backendCpu(admin: pg.Client, database: string): Promise<number> {
  let sum = 0;
  for (const { pid } of (await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = $1`, [database])).rows) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      sum += (Number(f[11]) + Number(f[12])) / 100;
    } catch {
      // not Linux, or the backend just ended
    }
  }
  return sum;
}

/**
 * Updates of `deliveries` so far, and how many were HOT. The statistics of the loop's own
 * connection (the pool has one) are flushed first: Postgres sends them only when a backend
 * goes idle, at most once a second, unless asked.
 */
async function deliveryUpdates(db: Database): Promise<{ upd: number; hot: number }> {
  if (db.driver.kind !== "postgres") return { upd: 0, hot: 0 };
  await db.driver.pool.query("SELECT pg_stat_force_next_flush()");
  await new Promise((r) => setTimeout(r, 200));
  const { rows } = await db.driver.pool.query<{ upd: string; hot: string }>(
    `SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE relname = 'deliveries'`,
  );
  return { upd: Number(rows[0]?.upd ?? 0), hot: Number(rows[0]?.hot ?? 0) };
}

/** What the calls of one statement cost, summed. */
export type Acc = { calls: number; deliveries: number; nodeUs: number; dbSec: number; wallMs: number };
export const acc = (): Acc => ({ calls: 0, deliveries: 0, nodeUs: 0, dbSec: 0, wallMs: 0 });

/**
 * Runs one call and adds what it cost to `a`: this process's CPU, the CPU of every backend
 * connected to `database` (read through `admin`), the wall time, and `n(result)` deliveries.
 */
export function timer(admin: pg.Client, database: string) {
  return async <T>(a: Acc, n: (r: T) => number, fn: () => Promise<T>): Promise<T> => {
    const db0 = await backendCpu(admin, database);
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    const r = await fn();
    const c = process.cpuUsage(c0);
    a.wallMs += performance.now() - t0;
    a.dbSec += (await backendCpu(admin, database)) - db0;
    a.nodeUs += c.user + c.system;
    a.calls++;
    a.deliveries += n(r);
    return r;
  };
}

/** A statement's row of the table: its cost per delivery and per call. */
export function costRow(statement: string, a: Acc, hot: string): StatementCost {
  return {
    statement,
    calls: a.calls,
    deliveries: a.deliveries,
    "node µs/delivery": Math.round(a.nodeUs / a.deliveries),
    "db µs/delivery": Math.round((a.dbSec * 1e6) / a.deliveries),
    "ms/call": Math.round((a.wallMs / a.calls) * 100) / 100,
    "HOT share of updates": hot,
  };
}

/**
 * Seeds `backlog` pending deliveries over HOOKS webhooks in database `url` (already migrated),
 * then runs `rounds` claim → record rounds and returns the cost per delivery of each statement.
 */
export async function measureStatements(serverUrl: string, url: string, database: string, opts: { backlog: number; rounds: number }): Promise<StatementCost[]> {
  const masterKey = newMasterKey();
  const db: Database = await openDatabase({ databaseUrl: url, dataDir: "", poolSize: 1 });
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    const projectId = newId("prj");
    await db.prisma.project.create({ data: { id: projectId, name: "statements" } });
    const hookIds: string[] = [];
    for (let i = 0; i < HOOKS; i++) {
      const id = newId("wh");
      hookIds.push(id);
      await db.prisma.webhook.create({ data: { id, projectId, url: "http://127.0.0.1:9/hook", events: ["user.created"], secretSealed: seal(masterKey, "whsec_" + randomBytes(32).toString("base64")) } });
    }
    await db.prisma.$executeRaw`
      WITH ev AS (
        INSERT INTO outbox_events (id, project_id, event_type, body)
        SELECT 'evt_st_' || i, ${projectId}, 'user.created',
               json_build_object('id', 'evt_st_' || i, 'event_type', 'user.created', 'created_at', now(), 'project_id', ${projectId}::text,
                                 'data', json_build_object('user', json_build_object('user_id', 'acc_' || i)))::text
        FROM generate_series(1, ${opts.backlog}::int) i
        RETURNING id, seq
      )
      INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type)
      SELECT 'dlv_' || substr(ev.id, 5), ev.id, (${hookIds}::text[])[(1 + ev.seq % ${HOOKS}::int)::int], ${projectId}, 'user.created'
      FROM ev`;
    await db.prisma.$executeRawUnsafe("VACUUM ANALYZE outbox_events");
    await db.prisma.$executeRawUnsafe("VACUUM ANALYZE deliveries");
    await db.prisma.$executeRawUnsafe("CHECKPOINT").catch(() => {});

    const timed = timer(admin, database);
    /** `rounds` claim → record rounds after 20 not counted; the cost of each and the HOT share of the updates. */
    const phase = async () => {
      const claim = acc();
      const record = acc();
      const apply = acc();
      let recorded = 0;
      let updates0 = { upd: 0, hot: 0 };
      const warmup = 20;
      for (let round = 0; round < warmup + opts.rounds; round++) {
        if (round === warmup) {
          Object.assign(claim, acc());
          Object.assign(record, acc());
          Object.assign(apply, acc());
          recorded = 0;
          updates0 = await deliveryUpdates(db);
        }
        const claimed = await timed(claim, (r) => r.length, () => sql.claimDue(db, { workerId: "bench", limit: LIMIT, leaseMs: 30_000, perWebhookCap: 20 }));
        if (claimed.length === 0) throw new Error("the backlog ran out; use a bigger --backlog");
        const now = Date.now();
        const results = claimed.map((c) => ({
          deliveryId: c.deliveryId,
          attemptId: newOrderedId("att"),
          attempt: c.attempt,
          status: "succeeded" as const,
          delayMs: null,
          statusCode: 200,
          error: null,
          startedAt: new Date(now),
          durationMs: 3,
          responseExcerpt: "ok",
          ...requestLog(c.eventId, c.attempt, now),
        }));
        await timed(record, (r) => r.length, () => sql.recordResults(db, "bench", results as never));
        recorded += results.length;
        // What a worker does about once a second (src/delivery/recorder.ts): add what the
        // records staged to the dashboard's rollups, many batches at once.
        if ((round + 1) % APPLY_EVERY === 0) {
          const n = recorded;
          await timed(apply, () => n, () => sql.applyStaged(db, false));
          recorded = 0;
        }
      }
      const updates = await deliveryUpdates(db);
      return { claim, record, apply, hot: `${Math.round((100 * (updates.hot - updates0.hot)) / Math.max(1, updates.upd - updates0.upd))} %` };
    };
    const on = await phase();
    const rows = [
      costRow(`claim (${LIMIT} per call)`, on.claim, on.hot),
      costRow(`record (${LIMIT} per call)`, on.record, on.hot),
      // The dashboard's numbers: the record statement stages them, and this adds the staged
      // batches to the rollups (dashboard.apply_staged, migration 20261125180000); per delivery.
      costRow(`apply staged numbers (every ${APPLY_EVERY} records)`, on.apply, "-"),
    ];
    rows.push(...(await measureEnqueue(db, projectId, masterKey, timed)));
    return rows;
  } finally {
    await admin.end();
    await db.close();
  }
}

/**
 * The outbox's statement (enqueue(): the event, its one delivery and the NOTIFY), one event per
 * call and per commit as in the open loop, with every trigger on `deliveries` that an enqueue can
 * fire, and then with them off: what the dashboard's counters cost the path from commit to send.
 */
async function measureEnqueue(
  db: Database,
  projectId: string,
  masterKey: MasterKey,
  timed: ReturnType<typeof timer>,
): Promise<StatementCost[]> {
  await db.prisma.webhook.create({
    data: { id: newId("wh"), projectId, url: "http://127.0.0.1:9/hook", events: ["user.updated"], secretSealed: seal(masterKey, "whsec_" + randomBytes(32).toString("base64")) },
  });
  const autocommit = db.prisma as unknown as Tx;
  const loop = async () => {
    const a = acc();
    for (let i = 0; i < 520; i++) {
      if (i === 20) Object.assign(a, acc());
      await timed(a, () => 1, () => enqueue(autocommit, { projectId, eventType: "user.updated", data: { user: { user_id: `acc_${i}` } } }));
    }
    return a;
  };
  const rows = [costRow("enqueue (1 event, 1 delivery per call)", await loop(), "-")];
  const triggers = await db.prisma.$queryRaw<{ tgname: string }[]>`
    SELECT tgname FROM pg_trigger WHERE tgrelid = 'deliveries'::regclass AND NOT tgisinternal AND (tgtype & 4) <> 0`;
  if (triggers.length > 0) {
    for (const t of triggers) await db.prisma.$executeRawUnsafe(`ALTER TABLE deliveries DISABLE TRIGGER ${t.tgname}`);
    rows.push(costRow(`enqueue, insert triggers off (${triggers.map((t) => t.tgname).join(", ")})`, await loop(), "-"));
    for (const t of triggers) await db.prisma.$executeRawUnsafe(`ALTER TABLE deliveries ENABLE TRIGGER ${t.tgname}`);
  }
  return rows;
}

/**
 * What the sender reports about the request it made, in both shapes the engine has stored: the
 * full header map (before) and the secrets it was signed with (now); each version of sql.ts
 * reads the one it knows.
 */
function requestLog(eventId: string, attempt: number, now: number) {
  const sig = "sha256=" + randomBytes(32).toString("hex");
  return {
    requestHeaders: {
      "Content-Type": "application/json",
      "X-Service-Signature": sig,
      "X-Service-Event-Id": eventId,
      "X-Service-Event-Type": "user.created",
      "X-Service-Delivery-Attempt": String(attempt),
      "webhook-id": eventId,
      "webhook-timestamp": String(Math.floor(now / 1000)),
      "webhook-signature": "v1," + randomBytes(32).toString("base64"),
      "User-Agent": "linkgate-webhooks/1",
    },
    signedWith: ["k1"],
  };
}

async function standalone(argv: string[]): Promise<void> {
  const arg = (name: string, dflt: number) => Number(argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? dflt);
  const serverUrl = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
  const name = `lg_bench_st_${randomBytes(4).toString("hex")}`;
  const admin = async (q: string) => {
    const c = new pg.Client({ connectionString: serverUrl });
    await c.connect();
    await c.query(q).finally(() => c.end());
  };
  await admin(`CREATE DATABASE ${name}`);
  try {
    const u = new URL(serverUrl);
    u.pathname = `/${name}`;
    const mig = await openDatabase({ databaseUrl: u.toString(), dataDir: "", poolSize: 1 });
    await applyMigrations(mig.adapterFactory);
    await mig.close();
    console.table(await measureStatements(serverUrl, u.toString(), name, { backlog: arg("backlog", 40_000), rounds: arg("rounds", 300) }));
  } finally {
    await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await standalone(process.argv.slice(2));
