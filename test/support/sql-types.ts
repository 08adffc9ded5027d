// Checks the fast path's hand-written row types against the schema: each statement runs on a
// migrated database (arguments all null, in a transaction rolled back) and must return exactly
// the columns its row type names, with the Postgres types declared for them.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { preparedStatements, type PgType } from "../../src/db/fast.ts";
import { backends, openTestDatabase, type TestDatabase } from "./db.ts";

/** Type OIDs (pg_type) of the types row types may use. */
const OIDS: Record<PgType, number> = { bool: 16, int4: 23, text: 25, float8: 701, timestamptz: 1184 };

type Fields = { name: string; dataTypeID: number }[];

/** Runs `text` with `params` null arguments and rolls back; returns the result's column descriptions. */
async function describeStatement(db: TestDatabase, text: string, params: number): Promise<Fields> {
  const values = Array.from({ length: params }, () => null);
  const d = db.driver;
  if (d.kind === "postgres") {
    const client = await d.pool.connect();
    try {
      await client.query("BEGIN");
      return (await client.query(text, values)).fields;
    } finally {
      await client.query("ROLLBACK");
      client.release();
    }
  }
  return d.pglite.transaction(async (tx) => {
    const fields = (await tx.query(text, values)).fields;
    await tx.rollback();
    return fields;
  });
}

/**
 * One suite per backend: the statements labelled `labels` (declared by the modules the test file
 * imported) are all there, and each returns the columns its row type declares.
 */
export function describeRowTypes(title: string, labels: string[]): void {
  // A label declared more than once (the claim, once per per-webhook cap a test used: they differ
  // in that constant only) is checked in its first form, so every run checks the same statements.
  const statements = () => {
    const seen = new Set<string>();
    return preparedStatements().filter((s) => labels.includes(s.label) && !seen.has(s.label) && seen.add(s.label));
  };
  describe.each(backends)(`${title} fast-path row types on %s`, (backend) => {
    let db: TestDatabase;
    beforeAll(async () => {
      db = await openTestDatabase(backend);
    });
    afterAll(async () => {
      await db?.close();
    });

    it("covers every statement named", () => {
      expect(statements().map((s) => s.label).sort()).toEqual([...labels].sort());
    });

    it.each(statements().map((s) => [s.label, s] as const))("%s returns the columns its row type declares", async (_label, st) => {
      const params = Math.max(0, ...[...st.text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
      const fields = await describeStatement(db, st.text, params);
      const declared = Object.entries(st.columns as Record<string, PgType>).map(([name, type]) => ({ name, dataTypeID: OIDS[type] }));
      expect(fields.map((f) => ({ name: f.name, dataTypeID: f.dataTypeID }))).toEqual(declared);
    });
  });
}
