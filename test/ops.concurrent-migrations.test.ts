// Servers started together on a new Postgres database (31st review): each found migrations
// pending and ran Prisma's engine, and those that came second waited for its migration lock
// inside a statement, holding a snapshot. A CREATE INDEX CONCURRENTLY of the first waits for
// every older snapshot, so Postgres found a deadlock and ended a waiting start: 2 of 3 servers
// died with "deadlock detected". Now a process waits for its migration turn by asking again,
// never inside a statement (src/db/migrations.ts inMigrationTurn). `db migrate` runs the same
// step as `npm start` does before it serves.
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminQuery, serverUrl, withDatabase } from "./support/db.ts";
import pg from "pg";

const BIN = fileURLToPath(new URL("../bin/linkgate.mjs", import.meta.url));

describe.runIf(serverUrl)("migrations started by three processes at once on a new database", () => {
  const name = `lg_together_${randomBytes(4).toString("hex")}`;
  let url: string;
  beforeAll(async () => {
    await adminQuery(`CREATE DATABASE ${name}`);
    url = withDatabase(serverUrl!, name);
  });
  afterAll(() => adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));

  /** One `linkgate db migrate` process; the timeout only catches a hang. */
  const migrate = () =>
    new Promise<{ code: number; output: string }>((resolve) => {
      const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: url };
      for (const k of Object.keys(env)) if (k.startsWith("LINKGATE_")) delete env[k];
      execFile(process.execPath, [BIN, "db", "migrate"], { env, timeout: 120_000 }, (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, output: stdout + stderr });
      });
    });

  it("all succeed, and every migration is applied once", async () => {
    const runs = await Promise.all([migrate(), migrate(), migrate()]);
    for (const r of runs) expect(r.code, r.output).toBe(0);
    expect(runs.map((r) => r.output).join("\n")).not.toMatch(/deadlock/);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query(`SELECT migration_name, count(*)::int AS n FROM _prisma_migrations GROUP BY 1 HAVING count(*) > 1 OR bool_or(finished_at IS NULL)`);
      expect(rows).toEqual([]);
    } finally {
      await client.end();
    }
  }, 180_000);
});
