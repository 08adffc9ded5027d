// The data set of the dashboard measurements (scripts/measure-dashboard.ts, scripts/measure-charts.ts):
// a whole linkgate on its own Postgres database with 1,000,000 deliveries over the last 7 days and
// 100,000 accounts, written in bulk with SQL (the delivery worker's own statement would take hours
// for that many). The rollup trigger runs as it does in production: attempts are logged in
// batched INSERTs.
//
// The database is `lg_measure_dashboard` on the server of TEST_DATABASE_URL / DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/postgres). It is kept between runs with --keep and reused when
// it already holds the data set; otherwise it is dropped at the end.
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { buildApp, type App } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { seal } from "../src/crypto.ts";
import { openDatabase, type Database } from "../src/db/client.ts";
import { createLogger } from "../src/log.ts";
import { generateWebhookSecret } from "../src/webhooks/secrets.ts";

export const DELIVERIES = 1_000_000;
export const ACCOUNTS = 100_000;
export const WEBHOOKS = 10;
/** Half of all deliveries go to the first webhook: the busiest one a view can show. */
export const BUSY_WEBHOOK = "wh_measure_0";

const NAME = "lg_measure_dashboard";
const API_KEY = "lg_sk_measure_dashboard_0123456789abcdef";
const SECRET_KEY = Buffer.alloc(32, 7).toString("base64");

const server = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/postgres";
const urlOf = (db: string) => Object.assign(new URL(server), { pathname: `/${db}` }).toString();

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: server });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

export type Measured = {
  app: App;
  db: Database;
  /** the database's connection string */
  url: string;
  apiKey: string;
  projectId: string;
  /** an account with an e-mail, an attached phone and a merged secondary */
  sample: { accountId: string; email: string; phone: string; partnerId: string };
  close(): Promise<void>;
};

const log = (msg: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`);

export async function openMeasured(opts: { keep: boolean }): Promise<Measured> {
  const exists = await (async () => {
    const client = new pg.Client({ connectionString: server });
    await client.connect();
    try {
      return (await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [NAME])).rowCount === 1;
    } finally {
      await client.end();
    }
  })();
  if (!exists) await admin(`CREATE DATABASE ${NAME}`);
  const url = urlOf(NAME);
  const db = await openDatabase({ databaseUrl: url, dataDir: "", poolSize: 10 });
  const config = loadConfig({
    DATABASE_URL: url,
    LINKGATE_DATA_DIR: mkdtempSync(path.join(tmpdir(), "linkgate-measure-")),
    LINKGATE_SECRET_KEY: SECRET_KEY,
    LINKGATE_BOOTSTRAP_API_KEY: API_KEY,
    LINKGATE_WORKER: "0",
    LOG_LEVEL: "silent",
  });
  const app = await buildApp(config, { db, logger: createLogger("silent") });
  const project = await db.prisma.project.findFirstOrThrow({ where: { name: "default" } });
  const seeded = (await db.prisma.delivery.count({ where: { projectId: project.id } })) >= DELIVERIES;
  if (!seeded) await seed(db, app, project.id);
  else log("reusing the seeded database");
  return {
    app,
    db,
    url,
    apiKey: API_KEY,
    projectId: project.id,
    sample: { accountId: "acc_m10", email: "user10@example.com", phone: "+12025550010", partnerId: "acc_m11" },
    async close() {
      await app.close();
      await db.close();
      if (!opts.keep) await admin(`DROP DATABASE IF EXISTS ${NAME} WITH (FORCE)`);
    },
  };
}

async function seed(db: Database, app: App, projectId: string): Promise<void> {
  const sql = (text: string, ...values: unknown[]) => db.prisma.$executeRawUnsafe(text, ...values);
  const started = performance.now();

  log(`seeding ${WEBHOOKS} webhooks`);
  for (let i = 0; i < WEBHOOKS; i++) {
    await sql(
      `INSERT INTO webhooks (id, project_id, url, events, description, secret_sealed) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
      `wh_measure_${i}`,
      projectId,
      `https://receiver-${i}.example.com/hooks`,
      ["user.created", "user.updated", "user.authentication.success", "user.merged"],
      `measurement webhook ${i}`,
      seal(app.deps.master, generateWebhookSecret()),
    );
  }

  log(`seeding ${ACCOUNTS} accounts, their identifiers, sessions and passkeys`);
  // Account i: e-mail user<i>@example.com (own); every 10th an attached phone; accounts 10…1009
  // merged in pairs (even primary, odd secondary); a live session for half of them (never a
// secondary: a merge ends those); every 10th a passkey.
  await sql(
    `INSERT INTO accounts (id, project_id, name, created_at, updated_at, last_login_at)
     SELECT 'acc_m' || i, $1, 'User ' || i, now() - interval '30 days', now() - interval '1 day', now() - (i % 1000) * interval '1 minute'
     FROM generate_series(0, $2::int - 1) i`,
    projectId,
    ACCOUNTS,
  );
  await sql(
    `INSERT INTO identifiers (id, project_id, account_id, kind, value, origin, created_at)
     SELECT 'idt_me' || i, $1, 'acc_m' || i, 'email', 'user' || i || '@example.com', 'own', now() - interval '30 days'
     FROM generate_series(0, $2::int - 1) i`,
    projectId,
    ACCOUNTS,
  );
  await sql(
    `INSERT INTO identifiers (id, project_id, account_id, kind, value, origin, created_at)
     SELECT 'idt_mp' || i, $1, 'acc_m' || i, 'phone', '+1' || (2025550000 + i)::text, 'attached', now() - interval '20 days'
     FROM generate_series(0, $2::int - 1, 10) i`,
    projectId,
    ACCOUNTS,
  );
  await sql(
    `UPDATE accounts SET merge_role = (CASE WHEN n % 2 = 0 THEN 'primary' ELSE 'secondary' END)::merge_role,
            merged_with_id = 'acc_m' || (CASE WHEN n % 2 = 0 THEN n + 1 ELSE n - 1 END), merged_at = now() - interval '10 days'
     FROM generate_series(10, 1009) n WHERE id = 'acc_m' || n`,
  );
  await sql(
    `INSERT INTO sessions (id, project_id, account_id, created_at, expires_at, auth_time, last_used_at, client_address, user_agent)
     SELECT 'ses_m' || i, $1, 'acc_m' || i, now() - interval '2 days', now() + interval '28 days', now() - interval '2 days', now() - interval '1 hour',
            '198.51.100.' || (i % 250), 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36'
     FROM generate_series(0, $2::int - 1) i
     WHERE (i % 2 = 0 OR i < 2000) AND NOT (i BETWEEN 10 AND 1009 AND i % 2 = 1)`,
    projectId,
    ACCOUNTS,
  );
  await sql(
    `INSERT INTO passkeys (id, project_id, account_id, credential_id, public_key, transports, device_type, backed_up, name, created_at)
     SELECT 'psk_m' || i, $1, 'acc_m' || i, 'cred' || i, '\\x00'::bytea, '{internal}', 'multiDevice', true, 'Laptop', now() - interval '15 days'
     FROM generate_series(0, $2::int - 1, 10) i`,
    projectId,
    ACCOUNTS,
  );

  // Events and deliveries, oldest first across 7 days: event i is about account i % ACCOUNTS; its
  // one delivery goes to webhook 0 when i is even (half of all), else to one of the other nine.
  // 90 % succeed at once, 7 % after one retry, 2 % fail all six attempts, 1 % (the newest) wait.
  const CHUNK = 100_000;
  for (let from = 0; from < DELIVERIES; from += CHUNK) {
    log(`seeding deliveries ${from} … ${from + CHUNK - 1}`);
    await sql(
      `WITH ev AS (
         INSERT INTO outbox_events (id, project_id, event_type, body, created_at)
         SELECT 'evt_m' || i, $1, t.type,
                json_build_object('id', 'evt_m' || i, 'event_type', t.type, 'created_at', to_char(c.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"000Z"'),
                  'project_id', $1::text,
                  'data', json_build_object('user', json_build_object('user_id', 'acc_m' || (i % $4::int), 'project_id', $1::text,
                    'email', 'user' || (i % $4::int) || '@example.com', 'name', 'User ' || (i % $4::int), 'status', 'active',
                    'created_at', '2026-10-01T00:00:00.000Z', 'updated_at', '2026-11-01T00:00:00.000Z', 'last_login', null)))::text,
                c.at
         FROM generate_series($2::int, $3::int) i
         CROSS JOIN LATERAL (SELECT now() - interval '7 days' * (1 - i::float8 / $5::int) AS at) c
         CROSS JOIN LATERAL (SELECT (ARRAY['user.created', 'user.updated', 'user.authentication.success'])[1 + i % 3] AS type) t
         RETURNING id, event_type, created_at
       )
       INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type, status, attempts, next_attempt_at, created_at, completed_at, last_status)
       SELECT 'dlv_m' || n, ev.id, CASE WHEN n % 2 = 0 THEN 'wh_measure_0' ELSE 'wh_measure_' || (1 + n % 9) END, $1, ev.event_type,
              o.status::delivery_status, o.attempts, ev.created_at, ev.created_at,
              CASE WHEN o.status IN ('succeeded', 'failed') THEN ev.created_at + interval '1 second' END, o.last_status
       FROM ev CROSS JOIN LATERAL (SELECT substr(ev.id, 6)::int AS n) k
       CROSS JOIN LATERAL (
         SELECT CASE WHEN n >= $5::int * 99 / 100 THEN 'pending' WHEN n % 50 = 2 THEN 'failed' ELSE 'succeeded' END AS status,
                CASE WHEN n >= $5::int * 99 / 100 THEN 0 WHEN n % 50 = 2 THEN 6 WHEN n % 100 < 7 THEN 2 ELSE 1 END AS attempts,
                CASE WHEN n >= $5::int * 99 / 100 THEN NULL WHEN n % 50 = 2 THEN 500 ELSE 200 END AS last_status
       ) o`,
      projectId,
      from,
      Math.min(DELIVERIES, from + CHUNK) - 1,
      ACCOUNTS,
      DELIVERIES,
    );
    // Every attempt of those deliveries, one statement (and one trigger run) per chunk; a success
    // takes 20 … 500 ms, a failure 5 … 50 ms.
    await sql(
      `INSERT INTO delivery_attempts (id, delivery_id, attempt, started_at, duration_ms, status_code, request_headers)
       SELECT 'att_m' || substr(d.id, 6) || '_' || a, d.id, a, d.created_at + (a - 1) * interval '10 seconds',
              CASE WHEN a = d.attempts AND d.status = 'succeeded' THEN 20 + (hashint4(a * 7919 + substr(d.id, 6)::int) & 2147483647) % 480
                   ELSE 5 + (hashint4(substr(d.id, 6)::int) & 2147483647) % 45 END,
              CASE WHEN a = d.attempts AND d.status = 'succeeded' THEN 200 ELSE 500 END, '{}'
       FROM deliveries d CROSS JOIN LATERAL generate_series(1, d.attempts) a
       WHERE d.id IN (SELECT 'dlv_m' || n FROM generate_series($1::int, $2::int) n)`,
      from,
      Math.min(DELIVERIES, from + CHUNK) - 1,
    );
  }
  log("VACUUM ANALYZE");
  const client = new pg.Client({ connectionString: urlOf(NAME) });
  await client.connect();
  await client.query("VACUUM ANALYZE");
  await client.end();
  log(`seeded in ${((performance.now() - started) / 1000).toFixed(0)} s`);
}

/** Median, 95th percentile and maximum of a list of milliseconds. */
export function summary(ms: number[]): { median: number; p95: number; max: number } {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)];
  const round = (n: number) => Math.round(n * 10) / 10;
  return { median: round(at(0.5)), p95: round(at(0.95)), max: round(s[s.length - 1]) };
}

export const newRequestId = () => randomBytes(4).toString("hex");
