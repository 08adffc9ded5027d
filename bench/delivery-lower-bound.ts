// The database cost per delivery of the leanest delivery data model we could build, measured
// the way bench/delivery-statements.ts measures ours: claim 50 → record 50 successes over a
// backlog of 10 webhooks (per-webhook cap 20), one call at a time, tick-sampled CPU of the
// database backend. Nothing in src/ uses this model: it bounds what any redesign of the
// delivery tables could save, and so whether the drain goal against graphile-worker can be
// reached by one (bench/RESULTS.md, delivery: "Why 1.1 is out of reach").
//
// The model is the one every plan so far converged on, reduced to what a delivery must write:
// * a queue that a delivery's row leaves by DELETE when it is done (graphile-worker's jobs do
//   that), narrow, with a single index for the claim and fillfactor 50, the lease in no index;
// * the attempt log appended to and never updated, with the three indexes the log has today
//   (id, delivery, start time: the log page, the delivery's attempts, retention);
// * no status kept anywhere else: a delivery's state would be read from its queue row and its
//   attempts. Nothing is staged for the dashboard and no trigger runs, which today's engine
//   pays for (about 5 µs per delivery, and one row per record), so this is a lower bound.
// The claim is today's claim (the loose scan over webhooks, each webhook's head up to the cap,
// the window, the lock and the lease, the event body and the webhook returned), on the queue.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { acc, costRow, timer, type StatementCost } from "./delivery-statements.ts";

const HOOKS = 10;
const LIMIT = 50;
const CAP = 20;

const SCHEMA = `
CREATE TABLE events (id text PRIMARY KEY, body text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE hooks (id text PRIMARY KEY, url text NOT NULL, secret_sealed text NOT NULL);
CREATE TABLE queue (
  id text PRIMARY KEY, webhook_id text NOT NULL, event_id text NOT NULL,
  run_at timestamptz NOT NULL DEFAULT now(), attempts int NOT NULL DEFAULT 0,
  lease_until timestamptz, leased_by text
) WITH (fillfactor = 50);
CREATE INDEX queue_due ON queue (webhook_id, run_at);
CREATE TABLE attempts (
  id text PRIMARY KEY, delivery_id text NOT NULL, attempt int NOT NULL, outcome text NOT NULL,
  started_at timestamptz NOT NULL, duration_ms int NOT NULL, status_code int, error text,
  response_excerpt text, signed_with text
);
CREATE INDEX attempts_delivery ON attempts (delivery_id);
CREATE INDEX attempts_started ON attempts (started_at)`;

/** Today's claim (src/delivery/sql.ts, claimStatement) with the queue in place of `deliveries`. */
const CLAIM = `
WITH RECURSIVE webhooks_due AS (
  (SELECT webhook_id FROM queue ORDER BY webhook_id LIMIT 1)
  UNION ALL
  SELECT (SELECT q.webhook_id FROM queue q WHERE q.webhook_id > h.webhook_id ORDER BY q.webhook_id LIMIT 1)
  FROM webhooks_due h WHERE h.webhook_id IS NOT NULL
), head AS MATERIALIZED (
  SELECT c.* FROM webhooks_due h CROSS JOIN LATERAL (
    SELECT q.id, q.webhook_id, q.run_at, coalesce(q.lease_until > now(), false) AS leased FROM queue q
    WHERE q.webhook_id = h.webhook_id AND q.run_at <= now() ORDER BY q.run_at LIMIT ${CAP}) c
  WHERE h.webhook_id IS NOT NULL
), ranked AS (
  SELECT id, run_at, leased, row_number() OVER (PARTITION BY webhook_id, leased ORDER BY run_at) AS rn,
         ${CAP} - count(*) FILTER (WHERE leased) OVER (PARTITION BY webhook_id) AS room
  FROM head
), picked AS (
  SELECT q.id FROM unnest(ARRAY(SELECT id FROM ranked WHERE NOT leased AND rn <= room ORDER BY rn, run_at)) WITH ORDINALITY AS c(id, ord)
  JOIN queue q ON q.id = c.id
  WHERE q.run_at <= now() AND (q.lease_until IS NULL OR q.lease_until <= now())
  ORDER BY c.ord LIMIT $1 FOR UPDATE OF q SKIP LOCKED
)
UPDATE queue q SET lease_until = now() + interval '30 seconds', leased_by = $2
FROM picked p, events e, hooks w
WHERE q.id = p.id AND e.id = q.event_id AND w.id = q.webhook_id
  AND set_config('synchronous_commit', 'off', true) IS NOT NULL
RETURNING q.id, q.attempts + 1 AS attempt, e.body, w.url, w.secret_sealed`;

/** A batch of results: each queue row leaves (a success), each attempt is appended, in one statement. */
const RECORD = `
WITH r AS (
  SELECT * FROM unnest($2::text[], $3::int[], $4::text[]) AS r(id, attempt, attempt_id)
), done AS (
  DELETE FROM queue q USING r WHERE q.id = r.id AND q.leased_by = $1 AND q.attempts = r.attempt - 1 RETURNING q.id
)
INSERT INTO attempts (id, delivery_id, attempt, outcome, started_at, duration_ms, status_code, response_excerpt, signed_with)
SELECT r.attempt_id, r.id, r.attempt, 'succeeded', now(), 3, 200, 'ok', 'k1' FROM r WHERE r.id IN (SELECT id FROM done)`;

/** Updates of the queue so far, and how many were HOT (this connection's statistics flushed first). */
async function queueUpdates(db: pg.Client): Promise<{ upd: number; hot: number }> {
  await db.query("SELECT pg_stat_force_next_flush()");
  await new Promise((r) => setTimeout(r, 200));
  const { rows } = await db.query<{ upd: string; hot: string }>(`SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE relname = 'queue'`);
  return { upd: Number(rows[0]?.upd ?? 0), hot: Number(rows[0]?.hot ?? 0) };
}

/**
 * Runs `rounds` claim → record rounds (after 20 not counted) of the lower-bound model in the
 * empty database `url` (named `database` on `serverUrl`'s server), over `backlog` deliveries.
 */
export async function measureLowerBound(serverUrl: string, url: string, database: string, opts: { backlog: number; rounds: number }): Promise<StatementCost[]> {
  const db = new pg.Client({ connectionString: url });
  const admin = new pg.Client({ connectionString: serverUrl });
  await db.connect();
  await admin.connect();
  try {
    await db.query(SCHEMA);
    await db.query(`INSERT INTO hooks SELECT 'wh_' || i, 'http://127.0.0.1:9/hook', $1 FROM generate_series(0, ${HOOKS - 1}) i`, ["sealed:" + randomBytes(48).toString("base64")]);
    await db.query(`INSERT INTO events (id, body) SELECT 'evt_' || i, json_build_object('id', 'evt_' || i, 'event_type', 'user.created', 'created_at', now(),
                      'data', json_build_object('user', json_build_object('user_id', 'acc_' || i)))::text FROM generate_series(1, $1::int) i`, [opts.backlog]);
    await db.query(`INSERT INTO queue (id, webhook_id, event_id) SELECT 'dlv_' || i, 'wh_' || (i % ${HOOKS}), 'evt_' || i FROM generate_series(1, $1::int) i`, [opts.backlog]);
    for (const t of ["events", "hooks", "queue"]) await db.query(`VACUUM ANALYZE ${t}`);
    const claim = { name: "lb_claim", text: CLAIM };
    const record = { name: "lb_record", text: RECORD };
    const cost = { claim: acc(), record: acc() };
    const timed = timer(admin, database);
    let attemptSeq = 0;
    let updates0 = { upd: 0, hot: 0 };
    for (let round = 0; round < 20 + opts.rounds; round++) {
      if (round === 20) {
        Object.assign(cost, { claim: acc(), record: acc() });
        updates0 = await queueUpdates(db);
      }
      const rows = await timed(cost.claim, (r) => r.length, async () => (await db.query<{ id: string; attempt: number }>({ ...claim, values: [LIMIT, "bench"] })).rows);
      if (rows.length === 0) throw new Error("the backlog ran out; use a bigger backlog");
      const attemptIds = rows.map(() => `att_${attemptSeq++}`);
      await timed(cost.record, () => rows.length, () => db.query({ ...record, values: ["bench", rows.map((r) => r.id), rows.map((r) => r.attempt), attemptIds] }));
    }
    const updates = await queueUpdates(db);
    const hot = `${Math.round((100 * (updates.hot - updates0.hot)) / Math.max(1, updates.upd - updates0.upd))} %`;
    return [
      // the claim's leases are the queue's only updates
      costRow(`lower bound: claim from a queue (${LIMIT} per call)`, cost.claim, hot),
      costRow(`lower bound: record = queue row deleted + attempt appended (${LIMIT} per call)`, cost.record, "-"),
    ];
  } finally {
    await db.end();
    await admin.end();
  }
}
