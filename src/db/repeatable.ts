// Repeatable migrations (Flyway's `R__` files): the database's functions and triggers live in
// real .sql files beside the feature that calls them, and are (re)created whenever a file's
// content changes. Ordinary migrations (prisma/migrations) change tables only; they are
// history, checksummed by Prisma, so a function written there had to be copied whole into a
// new migration for every one-line change, as an escape string with every semicolon written
// \x3B (Prisma's applier splits a file at each semicolon, quoted or not).
//
// Write a function LANGUAGE sql only when Postgres inlines it into its caller: a scalar one whose
// body is one expression with no FROM and no sub-select, or a STABLE set-returning one of one
// SELECT called in a FROM (account_sign_in_identifiers). Postgres 15 parses and plans any other
// LANGUAGE sql function again on every call, where PL/pgSQL keeps its plans per connection
// (src/linking/link-verify.sql says what that cost the link flow; test/db.migrations.test.ts
// asks Postgres whether it inlines each one).
//
// After editing a .sql file, run `npm run db:dump-schema` so prisma/schema.sql shows the change
// (test/db.schema-dump.test.ts fails until it does), and ship it with an ordinary migration
// (docs/operations.md, "Expand, then contract").
//
// How it is applied (applyMigrations runs it after the ordinary migrations):
// * Each file is recorded in `_linkgate_repeatable` (name, sha256 of its text, when). A file
//   whose checksum differs from its row, or that has none, is run again; the others are not
//   touched, so a change to one file re-creates only its own functions and triggers (a trigger
//   re-created takes a lock on its table: deliveries, the hottest one).
// * A file is known by its name: a renamed file is a new one, applied in full, and the rows of
//   files this build no longer has (an old name) are deleted when it applies anything. What
//   those files created is not: nothing here drops a definition, so renaming what a file
//   defines, or dropping what it no longer defines, is the job of an ordinary migration that
//   runs before it (20261125170500_dashboard_schema renamed the schema of
//   delivery/console-*.sql, then delivery/dashboard-*.sql re-created those functions in place).
// * The files run in the order of REPEATABLE below (a LANGUAGE sql function is checked against
//   the functions it calls when it is created, so those come first), all in one transaction
//   with their rows: a file that fails leaves every definition and checksum as it was.
// * Several processes may start at once on one Postgres database: the step holds a
//   transaction-level advisory lock, and reads the checksums again under it, so the first
//   process applies and the others find everything current and do nothing. A process that
//   finds the checksums current before locking (every start but the first of a release)
//   takes no lock at all.
// * An older build restarting during a rolling upgrade (docs/operations.md) must not put its
//   definitions back over the newer ones: a process that finds ordinary migrations it does not
//   know in `_prisma_migrations` leaves the repeatable step alone.
//
// Why a table of its own and not rows in `_prisma_migrations`: Prisma treats every row there as
// a migration of the folder, and a name it cannot find there is reported as a migration
// missing from the folder (prisma migrate status / dev, on machines with the native engine);
// and its checksum column is Prisma's own. `_linkgate_repeatable` is created by this step,
// like Prisma creates its own table, so no ordinary migration and no model describe it.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { SqlMigrationAwareDriverAdapterFactory, Transaction } from "@prisma/driver-adapter-utils";
import { unknownMigrations } from "./applied-migrations.ts";

/**
 * The repeatable files, paths relative to src/, in the order they are applied. Each file's
 * header says what its functions are for; the numbers that chose their form are there too.
 */
export const REPEATABLE = [
  "rate-limit.sql", // how a counter of rate_limits counts (the statements of src/rate-limit.ts and the caps of auth/sign-in.sql read it)
  "webhooks/outbox.sql", // outbox_enqueue (link_enqueue calls it)
  "webhooks/event-accounts.sql", // dashboard.event_account, dashboard.event_secondary_account (indexed)
  "webhooks/changes.sql", // webhook_changed_notify and its trigger (the delivery workers hear of a webhook's change)
  "auth/sign-in-identifiers.sql", // account_sign_in_identifiers (link_verify calls it)
  "auth/proofs.sql", // proven_through_secondary (what an unmerge separates)
  "linking/link-verify.sql", // link_user_object, link_enqueue, link_verify
  "auth/sign-in.sql", // sign_in_capped, sign_in_verify (they call link_user_object, link_text_array, outbox_enqueue)
  "delivery/dashboard-rollups.sql", // the dashboard's hourly attempt counts and their trigger
  "delivery/dashboard-states.sql", // the webhook list's per-state counts and their triggers
] as const;

export type RepeatableFile = { name: string; sql: string };

const srcDir = new URL("../", import.meta.url);

/** The repeatable files of this build, read from beside their features. */
export async function readRepeatable(): Promise<RepeatableFile[]> {
  return Promise.all(REPEATABLE.map(async (name) => ({ name, sql: await readFile(new URL(name, srcDir), "utf8") })));
}

/** The advisory lock of the repeatable step ("lgrp"); Prisma's own applier uses 72707369. */
export const REPEATABLE_LOCK = 0x6c677270;

const TABLE = "_linkgate_repeatable";

export function checksum(sql: string): string {
  return createHash("sha256").update(sql).digest("hex");
}

export type RepeatableOptions = {
  /** Defaults to this build's files (readRepeatable). */
  files?: RepeatableFile[];
  /** The ordinary migrations this build knows (directory names); see the header. */
  knownMigrations: string[];
};

/** Applies the repeatable files whose checksums changed; returns their names, in order. */
export async function applyRepeatable(adapterFactory: SqlMigrationAwareDriverAdapterFactory, opts: RepeatableOptions): Promise<string[]> {
  const files = opts.files ?? (await readRepeatable());
  const sums = new Map(files.map((f) => [f.name, checksum(f.sql)]));
  const adapter = await adapterFactory.connect();
  try {
    if (await allCurrent(adapter, sums)) return [];
    const tx = await adapter.startTransaction();
    let applied: string[] = [];
    try {
      await exec(tx, `SELECT pg_advisory_xact_lock(${REPEATABLE_LOCK})`);
      await exec(
        tx,
        `CREATE TABLE IF NOT EXISTS ${TABLE} (name text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
      );
      if ((await unknownMigrations(tx, opts.knownMigrations)).length === 0) {
        const recorded = await recordedChecksums(tx);
        await lockTriggerTables(tx, files.filter((f) => recorded.get(f.name) !== sums.get(f.name)));
        for (const f of files) {
          if (recorded.get(f.name) === sums.get(f.name)) continue;
          for (const statement of splitStatements(f.sql)) {
            await exec(tx, statement).catch((e: unknown) => {
              throw new Error(`repeatable migration ${f.name}: ${errorText(e)}`, { cause: e });
            });
          }
          await tx.executeRaw({
            sql: `INSERT INTO ${TABLE} (name, checksum, applied_at) VALUES ($1, $2, now())
                  ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, applied_at = excluded.applied_at`,
            args: [f.name, sums.get(f.name)],
            argTypes: [text, text],
          });
          applied.push(f.name);
        }
        if (applied.length > 0) await forgetOthers(tx, files);
      }
    } catch (e) {
      applied = [];
      await finish(tx, "ROLLBACK");
      throw e;
    }
    await finish(tx, "COMMIT");
    return applied;
  } finally {
    await adapter.dispose();
  }
}

const text = { scalarType: "string", arity: "scalar" } as const;

function exec(tx: Pick<Transaction, "executeRaw">, sql: string) {
  return tx.executeRaw({ sql, args: [], argTypes: [] });
}

/**
 * The tables whose triggers the step may re-create, in the order the hottest statement writes
 * them: the delivery worker's record updates deliveries, then inserts into delivery_attempts.
 * CREATE TRIGGER holds a SHARE ROW EXCLUSIVE lock on its table until the step commits, and the
 * files run in one transaction, dashboard-rollups.sql (delivery_attempts) before
 * dashboard-states.sql (deliveries): a release changing both deadlocked with a record that held
 * deliveries and waited for delivery_attempts (the previous build's worker logged "deadlock
 * detected" during an upgrade). Taking both up front, in the record's order, makes the step
 * wait behind a record instead (docs/operations.md, "Upgrades without downtime").
 */
const TRIGGER_TABLES = ["deliveries", "delivery_attempts"];
const TRIGGER_ON = /CREATE\s+(?:OR\s+REPLACE\s+)?TRIGGER\s+\w+[^;]*?\bON\s+(?:public\.)?(\w+)/gi;

async function lockTriggerTables(tx: Transaction, applying: RepeatableFile[]): Promise<void> {
  const named = new Set(applying.flatMap((f) => [...f.sql.matchAll(TRIGGER_ON)].map((m) => m[1].toLowerCase())));
  const tables = TRIGGER_TABLES.filter((t) => named.has(t));
  if (tables.length > 0) await exec(tx, `LOCK TABLE ${tables.map((t) => `public.${t}`).join(", ")} IN SHARE ROW EXCLUSIVE MODE`);
}

/**
 * Ends a transaction the way Prisma's engine does: the pg adapter began it with BEGIN and
 * expects the caller to send COMMIT or ROLLBACK (usePhantomQuery false); PGlite's adapter runs
 * it inside pglite.transaction, which sends them itself.
 */
async function finish(tx: Transaction, how: "COMMIT" | "ROLLBACK") {
  if (how === "ROLLBACK") {
    if (!tx.options.usePhantomQuery) await exec(tx, "ROLLBACK").catch(() => {});
    await tx.rollback();
    return;
  }
  if (!tx.options.usePhantomQuery) await exec(tx, "COMMIT");
  await tx.commit();
}

/** Deletes the rows of files this build does not have (renamed or removed since). */
async function forgetOthers(tx: Pick<Transaction, "executeRaw">, files: RepeatableFile[]) {
  await tx.executeRaw({
    sql: `DELETE FROM ${TABLE} WHERE NOT (name = ANY ($1::text[]))`,
    args: [files.map((f) => f.name)],
    argTypes: [{ scalarType: "string", arity: "list" }],
  });
}

async function allCurrent(q: Pick<Transaction, "queryRaw">, sums: Map<string, string>): Promise<boolean> {
  const exists = await q.queryRaw({ sql: `SELECT to_regclass('${TABLE}') IS NOT NULL`, args: [], argTypes: [] });
  if (!exists.rows[0][0]) return false;
  const recorded = await recordedChecksums(q);
  return [...sums].every(([name, sum]) => recorded.get(name) === sum);
}

async function recordedChecksums(q: Pick<Transaction, "queryRaw">): Promise<Map<string, string>> {
  const res = await q.queryRaw({ sql: `SELECT name, checksum FROM ${TABLE}`, args: [], argTypes: [] });
  return new Map(res.rows.map((r) => [String(r[0]), String(r[1])]));
}

function errorText(e: unknown): string {
  if (e && typeof e === "object" && "cause" in e) {
    const c = (e as { cause?: { originalMessage?: string; message?: string } }).cause;
    if (c?.originalMessage || c?.message) return String(c.originalMessage ?? c.message);
  }
  return e instanceof Error ? e.message : String(e);
}

/**
 * The statements of a file, split at the semicolons that end them: not those inside quotes,
 * identifiers, dollar-quoted bodies or comments. Each runs on its own (PGlite's query, like
 * Postgres' extended protocol, takes one statement at a time). Pieces holding only comments
 * are dropped.
 */
export function splitStatements(sql: string): string[] {
  const out: string[] = [];
  let start = 0;
  let code = false;
  let i = 0;
  const n = sql.length;
  const cut = (end: number) => {
    if (code) out.push(sql.slice(start, end).trim());
    start = end + 1;
    code = false;
  };
  while (i < n) {
    const c = sql[i];
    if (c === "-" && sql[i + 1] === "-") {
      const nl = sql.indexOf("\n", i);
      i = nl < 0 ? n : nl + 1;
      continue;
    }
    if (c === "/" && sql[i + 1] === "*") {
      // Postgres block comments nest
      let depth = 1;
      i += 2;
      while (i < n && depth > 0) {
        if (sql[i] === "/" && sql[i + 1] === "*") (depth++, (i += 2));
        else if (sql[i] === "*" && sql[i + 1] === "/") (depth--, (i += 2));
        else i++;
      }
      continue;
    }
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    code = true;
    if (c === "'") {
      const escapes = /[eE]/.test(sql[i - 1] ?? "") && !/[\w$]/.test(sql[i - 2] ?? "");
      i++;
      while (i < n) {
        if (escapes && sql[i] === "\\") i += 2;
        else if (sql[i] === "'" && sql[i + 1] === "'") i += 2;
        else if (sql[i] === "'") break;
        else i++;
      }
      i++;
      continue;
    }
    if (c === '"') {
      const end = sql.indexOf('"', i + 1);
      i = end < 0 ? n : end + 1;
      continue;
    }
    if (c === "$" && !/[\w$]/.test(sql[i - 1] ?? "")) {
      const tag = /^\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$/.exec(sql.slice(i, i + 64));
      if (tag) {
        const end = sql.indexOf(tag[0], i + tag[0].length);
        i = end < 0 ? n : end + tag[0].length;
        continue;
      }
    }
    if (c === ";") cut(i);
    i++;
  }
  cut(n);
  return out;
}
