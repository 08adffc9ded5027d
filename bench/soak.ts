// Soak benchmark: `npm run bench -- soak`, or `npx tsx bench/soak.ts`. Postgres only (TEST_DATABASE_URL,
// DATABASE_URL, or postgres://postgres@127.0.0.1:5432/test); its own database, dropped at the end.
// A few minutes.
//
// Thirty days of traffic at a steady rate, with time compressed: every simulated day is written
// with its real timestamps in the past (day 1 is 30 days ago, day 30 ends now), then swept by the
// retention sweeper as of that day's end, then vacuumed (as autovacuum would within a day: it
// starts a table's vacuum once a fifth of it is dead, and retention removes a seventh a day).
//
// Each day:
// * volume, one INSERT … SELECT per table: EVENTS_PER_DAY events spread over the day, fanned out
//   to 3 webhooks (98 % succeeded after one attempt, 2 % failed after six), and per four events
//   a session (expires after a day), a sign-in code (expires after 10 minutes) and a rate-limit
//   window (10 minutes);
// * real flows through the app (buildApp over HTTP's fetch handler, codes read from a loopback
//   SMTP server): SIGN_INS_PER_DAY OTP sign-ins and one identifier link (request + verify), whose
//   events the real delivery worker delivers to a loopback receiver; those rows are then moved
//   back to the simulated day like the rest.
// Retention in the run: events (with their deliveries) 7 days, the delivery log 3 days, so the
// sweeper has a full day of each to remove from day 8 (day 4 for attempts) to day 30.
//
// Measured after day 1, day 10 and day 30, as the median time of ROUNDS calls each, and as the
// database pages (shared buffers hit or read) the query's plan touched, from EXPLAIN (ANALYZE,
// BUFFERS) of the same SQL: a count of work that the machine's other load does not move:
// * claim: claimDue (limit 50) over PENDING due deliveries, leases released after each call;
// * delivery log: the dashboard's first page of a webhook's deliveries (GraphQL Webhook.deliveries,
//   first: 50, newest first) and the page after it;
// * events pull: GraphQL `events(first: 100)` from a cursor one simulated hour old (a receiver
//   catching up), and with no cursor (from the oldest event kept: what walks past the rows the
//   sweeper removed);
// * table and index sizes of every table retention bounds (after each day's vacuum).
// Goals (issue 15): day-30 figures within 20 % of day 1; table sizes flat once retention kicks in
// (day 30 within 20 % of day 10).
//
// BENCH_SOAK_EVENTS_PER_DAY (default 5,000; 10,000 takes about 8 minutes) scales the volume.
import { loadavg } from "node:os";
import pg from "pg";
import { preparedStatements } from "../src/db/fast.ts";
import { claimDue, DEFAULT_PER_WEBHOOK_CAP, releaseLeases } from "../src/delivery/sql.ts";
import { startWorker } from "../src/delivery/worker.ts";
import { sweepOnce, type RetentionSettings } from "../src/retention/sweep.ts";
import type { Harness } from "../test/support/app.ts";
import { TestReceiver } from "../test/support/receiver.ts";

const DAYS = 30;
const DAY_MS = 86_400_000;
const EVENTS_PER_DAY = Number(process.env.BENCH_SOAK_EVENTS_PER_DAY ?? 5_000);
const HOOKS = 3;
const SIGN_INS_PER_DAY = 3;
const PENDING = 2_000;
const ROUNDS = 15;
const RETENTION: RetentionSettings = { eventsDays: 7, deliveryLogDays: 3 };
/** Tables retention bounds, and the ones it does not (accounts grow with the users). */
const TABLES = ["outbox_events", "deliveries", "delivery_attempts", "sessions", "otp_states", "rate_limits", "accounts"];
const EVENT_TYPES = ["user.created", "user.updated", "user.authentication.success", "user.identifier.linked", "user.merged"];

const log = (msg: string) => console.error(`[bench soak] ${msg}`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const mb = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;

type Sizes = Record<string, { table: number; indexes: number }>;
type Figure = "claim" | "logFirst" | "logNext" | "pullRecent" | "pullOldest";
type Probe = { ms: Record<Figure, number>; pages: Record<Figure, number>; sizes: Sizes; indexes: Record<string, number> };

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < ROUNDS + 2; i++) {
    const t0 = performance.now();
    await fn();
    if (i >= 2) samples.push(performance.now() - t0); // the first two warm the plan cache
  }
  return Math.round(median(samples) * 100) / 100;
}

export async function main(): Promise<void> {
  const loadAtStart = loadavg().map((l) => l.toFixed(1)).join(" ");
  const started = performance.now();
  process.env.TEST_DATABASE_URL ||= process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
  // test/support/db.ts reads the server URL at import; import it after it is set.
  const { startHarness } = await import("../test/support/app.ts");
  // This process sweeps as of each simulated day itself; the app's own sweeper stays off.
  const h: Harness = await startHarness("postgres", { env: { LINKGATE_RETENTION_SWEEP_SECONDS: "0" } });
  const receiver = await TestReceiver.start({ status: 200 });
  const admin = new pg.Client({ connectionString: h.db.url });
  await admin.connect();
  const q = (text: string, values: unknown[] = []) => admin.query(text, values);
  try {
    const hooks: string[] = [];
    for (let i = 0; i < HOOKS; i++) {
      const r = await h.gql(`mutation($url: String!, $events: [String!]!) { createWebhook(input: { url: $url, events: $events }) { ... on CreateWebhookPayload { webhook { id } } } }`, {
        url: receiver.url,
        events: EVENT_TYPES,
      });
      hooks.push(r.body.data.createWebhook.webhook.id);
    }
    await q(`INSERT INTO accounts (id, project_id) SELECT 'acc_soak_' || i, $1 FROM generate_series(0, 999) i`, [h.projectId]);
    const realStart = new Date();
    const simStart = realStart.getTime() - DAYS * DAY_MS;
    const dayStart = (d: number) => new Date(simStart + d * DAY_MS);

    const sizes = async (): Promise<Sizes> => {
      const { rows } = await q(
        `SELECT relname AS t, pg_table_size(c.oid) AS tbl, pg_indexes_size(c.oid) AS idx FROM pg_class c WHERE relname = ANY($1)`,
        [TABLES],
      );
      return Object.fromEntries(rows.map((r) => [r.t, { table: Number(r.tbl), indexes: Number(r.idx) }]));
    };

    const probe = async (d: number): Promise<Probe> => {
      // A backlog due now, as the worker finds it mid-day; settled into the day afterwards.
      await q(
        `WITH ev AS (
           INSERT INTO outbox_events (id, project_id, event_type, body)
           SELECT 'evt_pend_' || $2::int || '_' || i, $1, 'user.updated', '{"id":"evt_pend_' || $2::int || '_' || i || '"}' FROM generate_series(1, $3::int / ${HOOKS}) i
           RETURNING id)
         INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type)
         SELECT 'dlv_pend_' || substr(ev.id, 10) || '_' || h.n, ev.id, h.id, $1, 'user.updated' FROM ev CROSS JOIN unnest($4::text[]) WITH ORDINALITY h(id, n)`,
        [h.projectId, d, PENDING, hooks],
      );
      await q(`ANALYZE deliveries`);
      /** Pages the statement's plan touched (shared buffers hit or read), in a transaction rolled back. */
      const pages = async (text: string, values: unknown[]) => {
        await q("BEGIN");
        try {
          const { rows } = await q(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`, values);
          const plan = rows[0]["QUERY PLAN"][0].Plan;
          return Number(plan["Shared Hit Blocks"] ?? 0) + Number(plan["Shared Read Blocks"] ?? 0);
        } finally {
          await q("ROLLBACK");
        }
      };
      const ms = {} as Probe["ms"];
      const work = {} as Probe["pages"];
      const claimSql = preparedStatements().find((st) => st.label === "claim_due")!.text;
      work.claim = await pages(claimSql, [50, 30_000, "soak-explain", [], [], DEFAULT_PER_WEBHOOK_CAP]);
      ms.claim = await timed(async () => {
        const got = await claimDue(h.db, { workerId: "soak", limit: 50, leaseMs: 30_000, perWebhookCap: DEFAULT_PER_WEBHOOK_CAP });
        if (got.length === 0) throw new Error("the pending backlog is empty");
        await releaseLeases(h.db, "soak", got.map((g) => g.deliveryId));
      });
      // The dashboard's delivery log: GraphQL timed, and its query in SQL for the pages.
      const page = `query($id: ID!, $after: String) { webhook(id: $id) { deliveries(first: 50, after: $after) { edges { cursor node { id status attempts } } } } }`;
      let second: string | undefined;
      ms.logFirst = await timed(async () => {
        const r = await h.gql(page, { id: hooks[0] });
        second = r.body.data.webhook.deliveries.edges.at(-1).cursor;
      });
      ms.logNext = await timed(() => h.gql(page, { id: hooks[0], after: second }));
      const logSql = `SELECT id, status, attempts, created_at FROM deliveries WHERE webhook_id = $1 AND project_id = $2`;
      const order = ` ORDER BY created_at DESC, id DESC LIMIT 51`;
      work.logFirst = await pages(logSql + order, [hooks[0], h.projectId]);
      const { rows: last } = await q(logSql + order, [hooks[0], h.projectId]);
      work.logNext = await pages(logSql + ` AND (created_at, id) < ($3, $4)` + order, [hooks[0], h.projectId, last.at(-1).created_at, last.at(-1).id]);
      // The events pull: a receiver an hour behind, and one starting from the oldest event kept.
      const pull = `query($after: String) { events(after: $after, first: 100) { __typename ... on EventPage { events { id } } } }`;
      const { rows } = await q(
        `SELECT seq FROM outbox_events WHERE project_id = $1 AND created_at < $2 ORDER BY created_at DESC LIMIT 1`,
        [h.projectId, new Date(dayStart(d + 1).getTime() - 3_600_000)],
      );
      const hourAgo = Buffer.from(`v1:${rows[0].seq}`, "utf8").toString("base64url");
      ms.pullRecent = await timed(async () => {
        const r = await h.gql(pull, { after: hourAgo });
        if (r.body.data.events.__typename !== "EventPage") throw new Error(JSON.stringify(r.body));
      });
      ms.pullOldest = await timed(() => h.gql(pull, {}));
      const pullSql = `SELECT id, seq, event_type, created_at, body FROM outbox_events WHERE project_id = $1 AND test = false AND seq > $2 ORDER BY seq LIMIT 101`;
      work.pullRecent = await pages(pullSql, [h.projectId, rows[0].seq]);
      work.pullOldest = await pages(pullSql, [h.projectId, 0]);
      await q(
        `UPDATE deliveries SET status = 'succeeded', attempts = 1, completed_at = $2, created_at = $2, next_attempt_at = $2 WHERE id LIKE 'dlv_pend_' || $1::int || '\\_%'`,
        [d, new Date(dayStart(d + 1).getTime() - 60_000)],
      );
      await q(`UPDATE outbox_events SET created_at = $2 WHERE id LIKE 'evt_pend_' || $1::int || '\\_%'`, [d, new Date(dayStart(d + 1).getTime() - 60_000)]);
      const { rows: idx } = await q(
        `SELECT indexrelname AS i, pg_relation_size(indexrelid) AS b FROM pg_stat_user_indexes WHERE relname IN ('outbox_events', 'deliveries', 'delivery_attempts')`,
      );
      return { ms, pages: work, sizes: await sizes(), indexes: Object.fromEntries(idx.map((r) => [r.i, Number(r.b)])) };
    };

    /** The day's volume, one statement per table. */
    const bulkDay = async (d: number) => {
      await q(
        `WITH ev AS (
           INSERT INTO outbox_events (id, project_id, event_type, body, created_at)
           SELECT 'evt_soak_' || $2::int || '_' || i, $1, 'user.authentication.success',
                  json_build_object('id', 'evt_soak_' || $2::int || '_' || i, 'event_type', 'user.authentication.success', 'created_at', ts, 'project_id', $1::text,
                    'data', json_build_object('user', json_build_object('user_id', 'acc_soak_' || i % 1000, 'project_id', $1::text,
                      'email', 'user' || i % 1000 || '@example.com', 'name', null, 'status', 'active', 'created_at', ts, 'updated_at', ts, 'last_login', ts)))::text,
                  ts
           FROM (SELECT i, $3::timestamptz + i * ($4::float8 / $5::int) * interval '1 millisecond' AS ts FROM generate_series(1, $5::int) i) g
           RETURNING id, created_at),
         dl AS (
           INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type, status, attempts, created_at, next_attempt_at, completed_at, last_status)
           SELECT 'dlv_' || substr(ev.id, 5) || '_' || h.n, ev.id, h.id, $1, 'user.authentication.success',
                  CASE WHEN f THEN 'failed' ELSE 'succeeded' END::delivery_status, CASE WHEN f THEN 6 ELSE 1 END,
                  ev.created_at, ev.created_at, ev.created_at + interval '1 second', CASE WHEN f THEN 500 ELSE 200 END
           FROM ev CROSS JOIN unnest($6::text[]) WITH ORDINALITY h(id, n) CROSS JOIN LATERAL (SELECT random() < 0.02 AS f) r
           RETURNING id, attempts, created_at, last_status)
         INSERT INTO delivery_attempts (id, delivery_id, attempt, started_at, duration_ms, status_code)
         SELECT 'att_' || substr(dl.id, 5) || '_' || a, dl.id, a, dl.created_at + (a - 1) * interval '10 seconds', 40, dl.last_status
         FROM dl CROSS JOIN LATERAL generate_series(1, dl.attempts) a`,
        [h.projectId, d, dayStart(d), DAY_MS, EVENTS_PER_DAY, hooks],
      );
      const n = Math.floor(EVENTS_PER_DAY / 4);
      const series = `(SELECT i, $3::timestamptz + i * ($4::float8 / $5::int) * interval '1 millisecond' AS ts FROM generate_series(1, $5::int) i) g`;
      const args = [h.projectId, d, dayStart(d), DAY_MS, n];
      await q(`INSERT INTO sessions (id, project_id, account_id, created_at, expires_at, auth_time)
               SELECT 'ses_soak_' || $2::int || '_' || i, $1, 'acc_soak_' || i % 1000, ts, ts + interval '1 day', ts FROM ${series}`, args);
      await q(`INSERT INTO otp_states (id, project_id, purpose, kind, value, code_hash, expires_at, consumed_at, created_at)
               SELECT 'otp_soak_' || $2::int || '_' || i, $1, 'sign_in', 'email', 'user' || i % 1000 || '@example.com', md5(i::text), ts + interval '10 minutes', ts + interval '30 seconds', ts FROM ${series}`, args);
      await q(`INSERT INTO rate_limits (key, window_start, window_seconds, count)
               SELECT 'send:soak:' || $2::int || ':' || i || ':' || $1::text, ts, 600, 1 FROM ${series}`, args);
    };

    /** Real sign-ins and a link through the app, delivered by the real worker, then moved back to day `d`. */
    const realDay = async (d: number) => {
      const before = receiver.receipts.length;
      const users = [];
      for (let i = 0; i < SIGN_INS_PER_DAY; i++) users.push(await h.signIn({ email: `real-${d}-${i}@example.com` }));
      const auth = { authorization: `Bearer ${users[0].token}` };
      const req = await h.gql(`mutation($e: String) { requestLink(email: $e) { ... on OtpChallenge { stateId } } }`, { e: `linked-${d}@example.com` }, auth);
      const otp = await h.mailbox.otp(`linked-${d}@example.com`);
      await h.gql(`mutation($s: String!, $o: String!) { verifyLink(stateId: $s, otp: $o) { __typename } }`, { s: req.body.data.requestLink.stateId, o: otp }, auth);
      const { rows } = await q(`SELECT count(*)::int AS n FROM deliveries WHERE status = 'pending'`);
      const worker = startWorker({ db: h.db, config: { retryScheduleMs: [1_000], webhookTimeoutMs: 5_000, webhookAllowPrivate: true }, masterKey: h.app.deps.master, maintenanceIntervalMs: 0 });
      try {
        await receiver.waitFor(before + rows[0].n, 30_000);
      } finally {
        await worker.stop();
      }
      const shift = `${realStart.getTime() + 60_000 - dayStart(d + 1).getTime()} milliseconds`;
      const t = [realStart];
      await q(`UPDATE outbox_events SET created_at = created_at - $2::interval WHERE created_at >= $1`, [...t, shift]);
      await q(`UPDATE deliveries SET created_at = created_at - $2::interval, next_attempt_at = next_attempt_at - $2::interval, completed_at = completed_at - $2::interval WHERE created_at >= $1`, [...t, shift]);
      await q(`UPDATE delivery_attempts SET started_at = started_at - $2::interval WHERE started_at >= $1`, [...t, shift]);
      await q(`UPDATE sessions SET created_at = created_at - $2::interval, expires_at = expires_at - $2::interval, auth_time = auth_time - $2::interval,
               last_used_at = last_used_at - $2::interval, ended_at = ended_at - $2::interval WHERE created_at >= $1`, [...t, shift]);
      await q(`UPDATE otp_states SET created_at = created_at - $2::interval, expires_at = expires_at - $2::interval, consumed_at = consumed_at - $2::interval WHERE created_at >= $1`, [...t, shift]);
      await q(`UPDATE rate_limits SET window_start = window_start - $2::interval WHERE window_start >= $1`, [...t, shift]);
      await q(`UPDATE notices SET created_at = created_at - $2::interval, next_attempt_at = next_attempt_at - $2::interval WHERE created_at >= $1`, [...t, shift]);
    };

    const probes: Record<number, Probe> = {};
    const daily: { day: number; sweepS: number; rowsSwept: number; batches: number; longestBatchMs: number; idleSweepMs: number; vacuumS: number; totalMB: number }[] = [];
    for (let d = 0; d < DAYS; d++) {
      await bulkDay(d);
      await realDay(d);
      // The sweeper as of the day's end, run after run as it would be a second apart while cut off.
      const asOf = dayStart(d + 1);
      const t0 = performance.now();
      let rowsSwept = 0;
      let batches = 0;
      let longestBatchMs = 0;
      for (;;) {
        const r = await sweepOnce(h.db, RETENTION, undefined, { now: asOf });
        const n = Object.values(r.deleted).reduce((a, b) => a + b, 0);
        rowsSwept += n;
        batches += Object.values(r.deleted).reduce((a, b) => a + Math.ceil(b / 2_000), 0);
        longestBatchMs = Math.max(longestBatchMs, r.longestBatchMs ?? 0);
        if (r.more.length === 0) break;
      }
      const sweepS = (performance.now() - t0) / 1000;
      const t1 = performance.now();
      for (const t of TABLES) await q(`VACUUM ANALYZE ${t}`);
      const vacuumS = (performance.now() - t1) / 1000;
      // A run with nothing to remove: what the sweeper costs every minute of the day.
      const t2 = performance.now();
      await sweepOnce(h.db, RETENTION, undefined, { now: asOf });
      const idleSweepMs = Math.round(performance.now() - t2);
      const s = await sizes();
      const totalMB = mb(Object.values(s).reduce((a, b) => a + b.table + b.indexes, 0));
      daily.push({ day: d + 1, sweepS: Math.round(sweepS * 10) / 10, rowsSwept, batches, longestBatchMs, idleSweepMs, vacuumS: Math.round(vacuumS * 10) / 10, totalMB });
      log(`day ${d + 1}: swept ${rowsSwept} rows in ${sweepS.toFixed(1)} s, ${totalMB} MB`);
      if (d === 0 || d === DAYS - 1 || d === 9) probes[d + 1] = await probe(d);
    }

    const seconds = Math.round((performance.now() - started) / 1000);
    console.log(
      `\n## soak (Postgres; 30 simulated days of ${EVENTS_PER_DAY.toLocaleString("en")} events/day × ${HOOKS} webhooks, ` +
        `${(EVENTS_PER_DAY / 4).toLocaleString("en")} sessions, codes and rate-limit windows/day, ${SIGN_INS_PER_DAY} real sign-ins and 1 real link/day; ` +
        `retention: events ${RETENTION.eventsDays} d, delivery log ${RETENTION.deliveryLogDays} d; ${seconds} s)\n`,
    );
    const [p1, p10, p30] = [probes[1], probes[10], probes[DAYS]];
    const ratio = (a: number, b: number) => (b > 0 ? a / b : NaN);
    const figures: [string, Figure][] = [
      [`claim (50 of ${PENDING.toLocaleString("en")} due)`, "claim"],
      ["delivery log, first page", "logFirst"],
      ["delivery log, next page", "logNext"],
      ["events pull from 1 h back", "pullRecent"],
      ["events pull from the oldest kept", "pullOldest"],
    ];
    const table: Record<string, Record<string, string | number>> = {};
    for (const [name, k] of figures) {
      table[`${name}, ms`] = { "day 1": p1.ms[k], "day 10": p10.ms[k], "day 30": p30.ms[k], "30 / 1": ratio(p30.ms[k], p1.ms[k]).toFixed(2) };
      table[`${name}, pages`] = { "day 1": p1.pages[k], "day 10": p10.pages[k], "day 30": p30.pages[k], "30 / 1": ratio(p30.pages[k], p1.pages[k]).toFixed(2) };
    }
    for (const t of TABLES) {
      const at = (p: Probe) => `${mb(p.sizes[t].table)} + ${mb(p.sizes[t].indexes)}`;
      table[`${t}, MB (table + indexes)`] = { "day 1": at(p1), "day 10": at(p10), "day 30": at(p30), "30 / 1": "" };
    }
    console.table(table);
    console.log("index sizes, MB:");
    console.table(Object.fromEntries(Object.keys(p30.indexes).sort().map((i) => [i, { "day 1": mb(p1.indexes[i] ?? 0), "day 10": mb(p10.indexes[i] ?? 0), "day 30": mb(p30.indexes[i] ?? 0) }])));
    console.log(
      "per day (rowsSwept: rows the sweep's own statements deleted; an event's deliveries go with it by cascade and are not counted; " +
        "then VACUUM ANALYZE of the tables above, as autovacuum would within a day; then a sweep with nothing to remove):",
    );
    console.table(daily.filter((r) => r.day === 1 || r.day % 3 === 0 || r.day === DAYS));
    const total = (p: Probe) => Object.entries(p.sizes).filter(([t]) => t !== "accounts").reduce((a, [, b]) => a + b.table + b.indexes, 0);
    const verdict = (r: number, goal: number) => `${r.toFixed(2)} (goal ≤ ${goal}: ${r <= goal ? "met" : "MISSED"})`;
    console.log("goals (issue 15), day 30 / day 1, in time (moved by the machine's other load) and in pages touched (not):");
    for (const [name, k] of figures) console.log(`  ${name}: time ${verdict(ratio(p30.ms[k], p1.ms[k]), 1.2)}; pages ${verdict(ratio(p30.pages[k], p1.pages[k]), 1.2)}`);
    console.log(`  sizes of the retained tables, day 30 / day 10: ${verdict(ratio(total(p30), total(p10)), 1.2)}`);
    const longest = Math.max(...daily.map((r) => r.longestBatchMs));
    const busy = daily.filter((r) => r.rowsSwept > 0);
    console.log(
      `sweep: ${Math.round(median(busy.slice(-20).map((r) => r.rowsSwept))).toLocaleString("en")} rows a day (steady state) in ${median(busy.slice(-20).map((r) => r.sweepS))} s (median), ` +
        `longest DELETE statement ${longest} ms, a sweep with nothing to remove ${median(daily.map((r) => r.idleSweepMs))} ms (median), VACUUM of a day ${median(daily.slice(-20).map((r) => r.vacuumS))} s (median)`,
    );
    console.log(`load average at start ${loadAtStart}, at end ${loadavg().map((l) => l.toFixed(1)).join(" ")}`);
  } finally {
    await admin.end();
    await receiver.close();
    await h.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
