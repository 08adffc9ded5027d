import { describe, expect, it } from "vitest";
import { readFile } from "node:fs/promises";
import pg from "pg";
import { openDatabase, type Database } from "../src/db/client.ts";
import { applyMigrations, applyOrdinaryMigrations, pendingSchemaChanges, readMigrations } from "../src/db/migrations.ts";
import { applyRepeatable, checksum, readRepeatable, REPEATABLE, REPEATABLE_LOCK, splitStatements, type RepeatableFile } from "../src/db/repeatable.ts";
import { backends, openTestDatabase, serverUrl, TEST_CONNECT_TIMEOUT_MS } from "./support/db.ts";

describe("migrations", () => {
  it("prisma/schema.prisma and prisma/migrations describe the same database, and the check notices a difference", async () => {
    // One diff for both (each applies every migration to a new shadow database: some 15 s of CPU
    // here). A model only schema.prisma has must be all the diff finds: that guards the guard, for
    // if diffing silently returned nothing, the check would pass forever. The shadow database is
    // the empty one the run's setup dumped, as initdb makes it: the adapter's own runs initdb
    // again (about 3.3 s of CPU in a warm process here).
    const schema = await readFile(new URL("../prisma/schema.prisma", import.meta.url), "utf8");
    const db = await openTestDatabase("pglite", { empty: true });
    const shadow = await openTestDatabase("pglite", { empty: true });
    try {
      const adapters = Object.assign(Object.create(db.adapterFactory) as typeof db.adapterFactory, {
        connectToShadowDb: () => shadow.adapterFactory.connect(),
      });
      const sql = await pendingSchemaChanges(adapters, `${schema}\nmodel Extra {\n  id String @id\n}\n`);
      const extra = /-- CreateTable\nCREATE TABLE "Extra" \([^;]*\);/;
      expect(sql).toMatch(extra);
      const unmigrated = sql.replace(extra, "").trim();
      expect(unmigrated, `schema.prisma changed without a migration; run npm run db:new-migration -- <name>:\n${unmigrated}`).toBe("");
    } finally {
      await db.close();
      await shadow.close();
    }
  });

  describe.each(backends)("on %s", (backend) => {
    it("applies once and then finds nothing to apply", async () => {
      const db = await openTestDatabase(backend);
      try {
        expect(await applyMigrations(db.adapterFactory)).toEqual([]);
        const rows = await db.prisma.$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM _prisma_migrations`;
        expect(Number(rows[0].n)).toBeGreaterThan(0);
      } finally {
        await db.close();
      }
    });
  });
});

// The functions and triggers live in repeatable files (src/db/repeatable.ts), applied after the
// ordinary migrations whenever a file's content changes.
describe("repeatable migrations", () => {
  type Fn = { name: string; header: string; body: string };
  async function catalog(db: Database) {
    const functions = await db.prisma.$queryRaw<Fn[]>`
      SELECT n.nspname || '.' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' AS name,
             split_part(pg_get_functiondef(p.oid), 'AS $function$', 1) AS header, btrim(p.prosrc, E' \n') AS body
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname IN ('public', 'console', 'dashboard') ORDER BY 1`;
    const triggers = await db.prisma.$queryRaw<{ def: string }[]>`
      SELECT pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE NOT tgisinternal ORDER BY tgname`;
    return { functions: new Map(functions.map((f) => [f.name, f])), triggers: triggers.map((t) => t.def) };
  }

  const edit = (files: RepeatableFile[], name: string, from: string, to: string) =>
    files.map((f) => (f.name === name ? { ...f, sql: f.sql.replace(from, to) } : f));
  const known = async () => (await readMigrations()).migrationDirectories.map((d) => d.path);
  const outboxBody = async (db: Database) =>
    (await db.prisma.$queryRaw<{ src: string }[]>`SELECT prosrc AS src FROM pg_proc WHERE proname = 'outbox_enqueue'`)[0].src;
  const recorded = async (db: Database) =>
    db.prisma.$queryRaw<{ name: string; checksum: string }[]>`SELECT name, checksum FROM _linkgate_repeatable ORDER BY name`;

  it("splits a file at the semicolons that end statements only", () => {
    const sql = `-- a comment; not a statement
      CREATE FUNCTION f() RETURNS text LANGUAGE plpgsql AS $body$ BEGIN RETURN 'a;b'; END $body$;
      SELECT 'it''s; one', E'\\'; still', "odd;name" FROM t /* x; /* nested; */ y; */;
      SELECT $$;$$ -- trailing; comment
      ;
      -- only a comment; at the end`;
    expect(splitStatements(sql).map((s) => s.replace(/\s+/g, " "))).toEqual([
      "-- a comment; not a statement CREATE FUNCTION f() RETURNS text LANGUAGE plpgsql AS $body$ BEGIN RETURN 'a;b'; END $body$",
      `SELECT 'it''s; one', E'\\'; still', "odd;name" FROM t /* x; /* nested; */ y; */`,
      "SELECT $$;$$ -- trailing; comment",
    ]);
  });

  describe.each(backends)("on %s", (backend) => {
    it("leave every function and trigger the history defined as it defined it, add link_verify's jsonb form, and keep nothing for the build before the last release", async () => {
      const db = await openTestDatabase(backend, { empty: true });
      try {
        await applyOrdinaryMigrations(db.adapterFactory);
        const history = await catalog(db);
        expect(await applyRepeatable(db.adapterFactory, { knownMigrations: await known() })).toEqual([...REPEATABLE]);
        const now = await catalog(db);
        // triggers the history never had: the delivery workers hear of a webhook's change
        // (20261129234500_webhook_changes_notify), and the counts of gateways of the build before
        // the sliding windows go into the slices (20261130090000_sliding_rate_limits)
        expect(now.triggers).toEqual(
          [
            ...history.triggers,
            "CREATE TRIGGER rate_limits_previous_release_insert BEFORE INSERT ON public.rate_limits FOR EACH ROW WHEN ((COALESCE(cardinality(new.slices), 0) = 0)) EXECUTE FUNCTION rate_limit_previous_release()",
            "CREATE TRIGGER rate_limits_previous_release_update BEFORE UPDATE ON public.rate_limits FOR EACH ROW WHEN ((NOT (new.slices IS DISTINCT FROM old.slices))) EXECUTE FUNCTION rate_limit_previous_release()",
            "CREATE TRIGGER webhooks_changed_notify AFTER DELETE OR UPDATE OF url, enabled, secret_sealed, previous_secret_sealed, previous_secret_expires_at ON public.webhooks FOR EACH ROW EXECUTE FUNCTION webhook_changed_notify()",
          ].sort(),
        );
        // changed since by a release of their own, each with its migration: the two rollup triggers
        // return at once for the worker's record statement, which stages its numbers instead
        // (20261125180000_dashboard_staged_outcomes)
        const staged = ["dashboard.count_logged_attempts()", "dashboard.count_updated_deliveries()"];
        for (const name of staged) expect(now.functions.get(name)!.body).toContain("current_setting('linkgate.staged', true) = 'on'");
        // the same answers in forms Postgres does not parse and plan again on every call
        // (20261126110000_sql_functions_planned_once; the next test checks the rule)
        const account = "dashboard.event_account(body text)";
        const enqueue = "public.link_enqueue(p_project text, p_channel text, p_ids text[], p_types text[], p_bodies text[])";
        expect(now.functions.get(enqueue)!.header).toContain("LANGUAGE plpgsql");
        // a commit notifies only while no worker has promised to claim again (20261126150351_delivery_busy_workers)
        const outbox = "public.outbox_enqueue(p_channel text, p_ids text[], p_projects text[], p_types text[], p_bodies text[], p_tests boolean[], p_only_webhooks text[])";
        expect(now.functions.get(outbox)!.body).toContain("NOT EXISTS (SELECT 1 FROM delivery_busy_workers");
        // the delivered statuses written once, in a function Postgres inlines (20261128053000_delivery_ok)
        const outcome = "dashboard.outcome(project_id text, webhook_id text, delivery_status delivery_status, delivery_attempts integer, attempt integer, started_at timestamp with time zone, status_code integer, duration_ms integer)";
        expect(now.functions.get(outcome)!.body).toContain("public.delivery_ok(status_code)");
        // a deleted webhook's outcomes still count in its project's hours (20261130201000_staged_outcomes_of_deleted_webhooks)
        const addOutcomes = "dashboard.add_outcomes(batch dashboard.attempt_outcome[])";
        expect(now.functions.get(addOutcomes)!.body).toContain("FROM a WHERE EXISTS (SELECT 1 FROM public.webhooks w WHERE w.id = a.webhook_id)");
        const changed = [...staged, account, enqueue, outbox, outcome, addOutcomes];
        for (const [name, fn] of history.functions) {
          if (changed.includes(name)) continue;
          // the history wrote them in schema console, which 20261125170500_dashboard_schema renamed
          const renamed = name.startsWith("dashboard.") ? { ...fn, body: fn.body.replaceAll("console.", "dashboard.") } : fn;
          expect(now.functions.get(name), name).toEqual(renamed);
        }
        // what was kept for the build before the last release is gone: link_verify's positional
        // form and schema console (20261126020000_drop_previous_build_compat)
        expect([...now.functions.keys()].filter((k) => k.startsWith("public.link_verify("))).toEqual(["public.link_verify(p jsonb)"]);
        expect([...now.functions.keys()].filter((k) => k.startsWith("console."))).toEqual([]);
        expect([...now.functions.keys()].filter((k) => !history.functions.has(k))).toEqual([
          "dashboard.apply_staged(p_wait boolean)",
          "public.account_sign_in_identifiers(p_account text)",
          "public.delivery_ok(status_code integer)",
          "public.link_text_array(a jsonb)",
          "public.link_verify(p jsonb)",
          "public.otp_judge(p jsonb)",
          "public.otp_replay(p_project text, p_state text, p_purpose otp_purpose, p_account text, p_session text, p_hash text, p_max_tries integer)",
          "public.proven_through_secondary(p_primary text, p_secondary text)",
          "public.rate_limit_bumped(p_slices integer[], p_start timestamp without time zone, p_window integer, p_n integer)",
          "public.rate_limit_count(p_slices integer[], p_start timestamp without time zone, p_window integer)",
          "public.rate_limit_counted(p_key text, p_window integer)",
          "public.rate_limit_moved(p_start timestamp without time zone, p_window integer)",
          "public.rate_limit_previous_release()",
          "public.rate_limit_resets_in(p_key text, p_max integer)",
          "public.rate_limit_shift(p_start timestamp without time zone, p_window integer)",
          "public.rate_limit_wait(p_slices integer[], p_start timestamp without time zone, p_window integer, p_max integer)",
          "public.sign_in_address_capped(p_project text, p_kind identifier_kind, p_value text, p_group text, p_max integer)",
          "public.sign_in_capped(p_project text, p_kind identifier_kind, p_value text, p_prefix text, p_max integer, p_places text[], p_known_days integer)",
          "public.sign_in_verify(p jsonb)",
          "public.webhook_changed_notify()",
          "public.wrong_code_counted(p_project text, p_kind identifier_kind, p_value text, p_prefix text, p_window integer, p_group text, p_address_window integer)",
        ]);
      } finally {
        await db.close();
      }
    });

    it("leave every LANGUAGE sql function one Postgres inlines into its caller (src/db/repeatable.ts)", async () => {
      // migrated by applyMigrations, as every test database is (test/support/global-setup.ts)
      const db = await openTestDatabase(backend);
      try {
        const fns = await db.prisma.$queryRaw<{ name: string; args: string[]; set: boolean }[]>`
          SELECT n.nspname || '.' || p.proname AS name, p.proretset AS set,
                 ARRAY(SELECT format_type(t, NULL) FROM unnest(p.proargtypes) WITH ORDINALITY AS a(t, i) ORDER BY i) AS args
          FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang
          WHERE l.lanname = 'sql' AND n.nspname IN ('public', 'dashboard')`;
        expect(fns.length).toBeGreaterThan(0);
        for (const f of fns) {
          // arguments read from rows (two, or the planner would fold them into constants and an
          // immutable call with them), so the plan names the function only when Postgres runs it
          // as a call of its own
          const cols = f.args.map((_, i) => `a${i}`);
          const row = `(${f.args.map((t) => `NULL::${t}`).join(", ")})`;
          const rows = `(VALUES ${row}, ${row}) v(${cols})`;
          const call = `${f.name}(${cols.join(", ")})`;
          const query = f.set ? `SELECT * FROM ${rows}, ${call} x` : `SELECT ${call} FROM ${rows}`;
          const plan = await db.prisma.$queryRawUnsafe<Record<string, string>[]>(`EXPLAIN (VERBOSE) ${query}`);
          expect(plan.map((r) => Object.values(r)[0]).join("\n"), f.name).not.toContain(f.name.split(".")[1] + "(");
        }
      } finally {
        await db.close();
      }
    });

    it("apply nothing on an unchanged start, an edited file once, and a failing set not at all", async () => {
      const db = await openTestDatabase(backend);
      try {
        const files = await readRepeatable();
        const knownMigrations = await known();
        const before = await recorded(db);
        expect(before.map((r) => r.name).sort()).toEqual([...REPEATABLE].sort());
        expect(await applyMigrations(db.adapterFactory)).toEqual([]);

        const edited = edit(files, "webhooks/outbox.sql", "PERFORM pg_notify(p_channel, '');", "PERFORM pg_notify(p_channel, 'edited');");
        expect(await applyRepeatable(db.adapterFactory, { files: edited, knownMigrations })).toEqual(["webhooks/outbox.sql"]);
        expect(await outboxBody(db)).toContain("'edited'");
        expect(await applyRepeatable(db.adapterFactory, { files: edited, knownMigrations })).toEqual([]);
        const after = await recorded(db);
        expect(after.find((r) => r.name === "webhooks/outbox.sql")!.checksum).toBe(checksum(edited.find((f) => f.name === "webhooks/outbox.sql")!.sql));
        expect(after.filter((r) => r.name !== "webhooks/outbox.sql")).toEqual(before.filter((r) => r.name !== "webhooks/outbox.sql"));

        // one transaction: a file that fails takes the edit of the file before it back too
        const broken = edit(
          edit(files, "webhooks/outbox.sql", "PERFORM pg_notify(p_channel, '');", "PERFORM pg_notify(p_channel, 'again');"),
          "linking/link-verify.sql",
          "CREATE OR REPLACE FUNCTION link_text_array",
          "CREATE OR REPLACE FUNCTION link_text_array(no_such_type) RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\nCREATE OR REPLACE FUNCTION link_text_array",
        );
        await expect(applyRepeatable(db.adapterFactory, { files: broken, knownMigrations })).rejects.toThrow(/linking\/link-verify\.sql/);
        expect(await outboxBody(db)).toContain("'edited'");
        expect(await recorded(db)).toEqual(after);

        // an older build (it lacks a migration the database has) leaves the newer definitions alone
        expect(await applyRepeatable(db.adapterFactory, { files, knownMigrations: knownMigrations.slice(0, -1) })).toEqual([]);
        expect(await outboxBody(db)).toContain("'edited'");

        // this build's files again: back to what they say
        expect(await applyMigrations(db.adapterFactory)).toEqual(["webhooks/outbox.sql"]);
        expect(await outboxBody(db)).not.toContain("'edited'");
      } finally {
        await db.close();
      }
    });
  });

  it.skipIf(!serverUrl)("re-creating the delivery tables' triggers waits behind a worker's record instead of deadlocking with it", async () => {
    // The record updates deliveries, then inserts into delivery_attempts; the step re-created
    // delivery_attempts' trigger first (dashboard-rollups.sql), then deliveries' (the upgrade
    // test's previous build logged "deadlock detected" when a release changed both files).
    const db = await openTestDatabase("postgres");
    const record = new pg.Client({ connectionString: db.url });
    await record.connect();
    try {
      const files = edit(
        edit(await readRepeatable(), "delivery/dashboard-rollups.sql", "RETURNS trigger", "RETURNS trigger -- edited\n"),
        "delivery/dashboard-states.sql",
        "RETURNS trigger",
        "RETURNS trigger -- edited\n",
      );
      await record.query("BEGIN");
      await record.query("UPDATE deliveries SET attempts = attempts WHERE false");
      await record.query("LOCK TABLE deliveries IN ROW EXCLUSIVE MODE");
      const step = applyRepeatable(db.adapterFactory, { files, knownMigrations: await known() });
      const blocked = async () =>
        (await db.prisma.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'deliveries' AND NOT l.granted`)[0].n;
      while ((await blocked()) < 1) await new Promise((r) => setImmediate(r));
      // the record goes on to its attempts: it must not find the step holding them
      await record.query("LOCK TABLE delivery_attempts IN ROW EXCLUSIVE MODE");
      await record.query("COMMIT");
      expect((await step).sort()).toEqual(["delivery/dashboard-rollups.sql", "delivery/dashboard-states.sql"]);
    } finally {
      await record.end();
      await db.close();
    }
  });

  it.skipIf(!serverUrl)("two processes starting at once on Postgres both succeed, and the files are applied once", async () => {
    const db = await openTestDatabase("postgres");
    const other = await openDatabase({ databaseUrl: db.url!, dataDir: "", connectTimeoutMs: TEST_CONNECT_TIMEOUT_MS });
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      const files = edit(await readRepeatable(), "webhooks/outbox.sql", "PERFORM pg_notify(p_channel, '');", "PERFORM pg_notify(p_channel, 'both');");
      const knownMigrations = await known();
      // Both get past the checksum read and queue on the lock, so the second decides under it.
      await holder.query("SELECT pg_advisory_lock($1)", [REPEATABLE_LOCK]);
      const runs = [db, other].map((d) => applyRepeatable(d.adapterFactory, { files, knownMigrations }));
      const waiting = async () =>
        (await holder.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid::bigint = $1 AND NOT granted", [REPEATABLE_LOCK])).rows[0].n;
      while ((await waiting()) < 2) await new Promise((r) => setImmediate(r));
      await holder.query("SELECT pg_advisory_unlock($1)", [REPEATABLE_LOCK]);
      const results = await Promise.all(runs);
      expect(results.map((r) => r.join()).sort()).toEqual(["", "webhooks/outbox.sql"]);
      expect(await outboxBody(db)).toContain("'both'");
    } finally {
      await holder.end();
      await other.close();
      await db.close();
    }
  });
});

// Migration 20261125170500_dashboard_schema renames schema console to dashboard and leaves a
// compatibility schema console for the build before it (docs/operations.md, "Expand, then
// contract"). That build's trigger functions stay installed until the repeatable step that
// follows re-creates them, and its code keeps reading console.* for as long as it runs.
describe("the dashboard schema, renamed from console", () => {
  const RENAME = "20261125170500_dashboard_schema";
  /** The release after the rename drops the compatibility schema. */
  const DROP = "20261126020000_drop_previous_build_compat";

  /**
   * The previous build's repeatable files: these files as they were before the rename. Neither
   * build had ADDED_SINCE, which read columns their migrations had not made yet (rate-limit.sql's
   * triggers read rate_limits.slices), in the order applyMigrations applies them.
   */
  const ADDED_SINCE = ["rate-limit.sql", "auth/proofs.sql"];
  const previousFiles = (files: RepeatableFile[]) =>
    files.filter((f) => !ADDED_SINCE.includes(f.name)).map((f) => ({
      name: f.name.replace("delivery/dashboard-", "delivery/console-"),
      sql: f.sql.replaceAll("dashboard.", "console.").replaceAll("_dashboard_", "_console_"),
    }));

  /** One delivery per row, its event and (when it finished) its attempt, as the worker logs them. */
  async function deliver(db: Database, rows: { id: string; status: "succeeded" | "failed"; code: number; ms: number }[]) {
    for (const r of rows) {
      await db.prisma.$executeRawUnsafe(
        `INSERT INTO outbox_events (id, project_id, event_type, body) VALUES ($1, 'p1', 'user.created', $2)`,
        `evt_${r.id}`,
        JSON.stringify({ data: { user: { user_id: `acc_${r.id}` } } }),
      );
      await db.prisma.$executeRawUnsafe(
        `INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type) VALUES ($1, $2, 'w1', 'p1', 'user.created')`,
        r.id,
        `evt_${r.id}`,
      );
      // the worker's record statement: the delivery's new state and its attempt, at once
      await db.prisma.$executeRawUnsafe(
        `WITH u AS (UPDATE deliveries SET status = $2::delivery_status, attempts = 1, completed_at = now() WHERE id = $1 RETURNING id)
         INSERT INTO delivery_attempts (id, delivery_id, attempt, started_at, duration_ms, status_code) SELECT 'att_' || id, id, 1, now(), $4, $3 FROM u`,
        r.id,
        r.status,
        r.code,
        r.ms,
      );
    }
  }

  const counts = async (db: Database) => {
    const [row] = await db.prisma.$queryRawUnsafe<Record<string, number>[]>(`
      SELECT (SELECT sum(succeeded)::int FROM dashboard.webhook_hours) AS hour_ok, (SELECT sum(failed)::int FROM dashboard.webhook_hours) AS hour_failed,
             (SELECT sum(succeeded)::int FROM dashboard.project_hours) AS project_ok,
             (SELECT sum(succeeded)::int FROM dashboard.webhook_delivery_hours) AS state_ok,
             (SELECT sum(failed)::int FROM dashboard.webhook_delivery_hours) AS state_failed, (SELECT sum(gone)::int FROM dashboard.webhook_delivery_hours) AS state_gone`);
    return row;
  };

  describe.each(backends)("on %s", (backend) => {
    it("counts with the previous build's trigger functions in between, serves the previous build's reads through console, and counts on once the release after drops it", async () => {
      const db = await openTestDatabase(backend, { empty: true });
      try {
        const all = await readMigrations();
        const before = { ...all, migrationDirectories: all.migrationDirectories.filter((d) => d.path < RENAME) };
        await applyOrdinaryMigrations(db.adapterFactory, before);
        const previous = previousFiles(await readRepeatable());
        await applyRepeatable(db.adapterFactory, { files: previous, knownMigrations: before.migrationDirectories.map((d) => d.path) });
        await db.prisma.$executeRawUnsafe(`INSERT INTO projects (id, name) VALUES ('p1', 'p')`);
        await db.prisma.$executeRawUnsafe(`INSERT INTO webhooks (id, project_id, url, secret_sealed) VALUES ('w1', 'p1', 'http://127.0.0.1:9/', 's')`);
        await deliver(db, [{ id: "d1", status: "succeeded", code: 200, ms: 12 }]);

        // The rename's release, and not yet its repeatable files: the previous build's functions
        // (now in schema dashboard) run and resolve console.* in the compatibility schema.
        const renamed = { ...all, migrationDirectories: all.migrationDirectories.filter((d) => d.path < DROP) };
        expect(await applyOrdinaryMigrations(db.adapterFactory, renamed)).toEqual(renamed.migrationDirectories.map((d) => d.path).filter((p) => p >= RENAME));
        expect((await catalog(db)).bodies.filter((b) => b.includes("console.")).length).toBeGreaterThan(0);
        await deliver(db, [
          { id: "d2", status: "succeeded", code: 200, ms: 40 },
          { id: "d3", status: "failed", code: 410, ms: 5 },
        ]);
        // a delivery inserted finished (seeds and tests do), and one that changes state
        await db.prisma.$executeRawUnsafe(`INSERT INTO outbox_events (id, project_id, event_type, body) VALUES ('evt_d4', 'p1', 'user.created', '{}')`);
        await db.prisma.$executeRawUnsafe(`INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type, status, attempts, completed_at)
                                           VALUES ('d4', 'evt_d4', 'w1', 'p1', 'user.created', 'gone', 1, now())`);
        await db.prisma.$executeRawUnsafe(`UPDATE deliveries SET status = 'gone' WHERE id = 'd3'`);
        expect(await counts(db)).toEqual({ hour_ok: 2, hour_failed: 1, project_ok: 2, state_ok: 2, state_failed: 0, state_gone: 2 });

        // The rename's repeatable files: every function says dashboard, the old files' rows are gone.
        const renameFiles = (await readRepeatable()).filter((f) => !ADDED_SINCE.includes(f.name));
        expect(await applyRepeatable(db.adapterFactory, { files: renameFiles, knownMigrations: renamed.migrationDirectories.map((d) => d.path) })).toEqual([
          "webhooks/event-accounts.sql",
          "delivery/dashboard-rollups.sql",
          "delivery/dashboard-states.sql",
        ]);
        const now = await catalog(db);
        expect(now.bodies.filter((b) => b.includes("console.")).length).toBe(0);
        expect(now.triggers.filter((t) => /console/.test(t))).toEqual([]);
        expect((await recorded(db)).map((r) => r.name).sort()).toEqual(renameFiles.map((f) => f.name).sort());
        await db.prisma.$executeRawUnsafe(`DELETE FROM deliveries WHERE id = 'd2'`);
        await deliver(db, [{ id: "d5", status: "succeeded", code: 201, ms: 7 }]);
        expect(await counts(db)).toEqual({ hour_ok: 3, hour_failed: 1, project_ok: 3, state_ok: 2, state_failed: 0, state_gone: 2 });

        // What the previous build's code reads (src/delivery/charts.ts and src/console/users.ts at
        // that build), with the index of its account filter.
        const [old] = await db.prisma.$queryRawUnsafe<Record<string, number>[]>(`
          SELECT (SELECT sum(succeeded)::int FROM console.webhook_hours h WHERE h.webhook_id = 'w1' AND h.project_id = 'p1') AS hooks,
                 (SELECT sum(succeeded)::int FROM console.project_hours h WHERE h.project_id = 'p1') AS projects,
                 (SELECT sum(succeeded)::int FROM console.webhook_delivery_hours s WHERE s.webhook_id = 'w1') AS states`);
        expect(old).toEqual({ hooks: 3, projects: 3, states: 2 });
        const accountQuery = `SELECT id FROM outbox_events WHERE project_id = 'p1' AND NOT test AND console.event_account(body) = 'acc_d5' ORDER BY seq DESC LIMIT 50`;
        expect(await db.prisma.$queryRawUnsafe(accountQuery)).toEqual([{ id: "evt_d5" }]);
        const plan = await db.prisma.$transaction(async (tx) => {
          await tx.$executeRawUnsafe("SET LOCAL enable_seqscan = off");
          return tx.$queryRawUnsafe<{ "QUERY PLAN": string }[]>(`EXPLAIN (COSTS OFF) ${accountQuery}`);
        });
        expect(plan.map((r) => r["QUERY PLAN"]).join("\n")).toContain("outbox_events_account_idx");

        // The release after (and the migrations since): the compatibility schema goes, and the
        // counting goes on without it.
        expect(await applyMigrations(db.adapterFactory)).toEqual([...all.migrationDirectories.map((d) => d.path).filter((p) => p >= DROP), ...ADDED_SINCE]);
        const schemas = await db.prisma.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'console'`;
        expect(schemas[0].n).toBe(0);
        await deliver(db, [{ id: "d6", status: "succeeded", code: 200, ms: 3 }]);
        expect(await counts(db)).toEqual({ hour_ok: 4, hour_failed: 1, project_ok: 4, state_ok: 3, state_failed: 0, state_gone: 2 });
        const accounts = `SELECT id FROM outbox_events WHERE project_id = 'p1' AND NOT test AND dashboard.event_account(body) = 'acc_d6'`;
        expect(await db.prisma.$queryRawUnsafe(accounts)).toEqual([{ id: "evt_d6" }]);
      } finally {
        await db.close();
      }
    });
  });

  async function catalog(db: Database) {
    const bodies = await db.prisma.$queryRaw<{ body: string }[]>`
      SELECT p.prosrc AS body FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'dashboard'`;
    const triggers = await db.prisma.$queryRaw<{ def: string }[]>`SELECT pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE NOT tgisinternal`;
    return { bodies: bodies.map((b) => b.body), triggers: triggers.map((t) => t.def) };
  }
  const recorded = async (db: Database) => db.prisma.$queryRaw<{ name: string }[]>`SELECT name FROM _linkgate_repeatable`;
});
