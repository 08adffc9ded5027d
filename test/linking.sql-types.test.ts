// The hand-written row types of the link flow's fast-path statements against the schema: each
// statement runs on a migrated database (arguments all null, in a transaction rolled back) and
// must return exactly the columns its row type names, with the Postgres types declared for them.
// (test/delivery.sql-types.test.ts does the same for the delivery engine's statements.)
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { preparedStatements, type PgType } from "../src/db/fast.ts";
import "../src/auth/authenticate.ts";
import "../src/auth/rate-limit.ts";
import "../src/linking/service.ts";
import "../src/messaging/notices.ts";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";

const LINK_FLOW = ["authenticate_user", "claim_notices", "count_all", "count_failures", "link_state", "link_verify", "record_notices_sent"];

/** Type OIDs (pg_type) of the types row types may use. */
const OIDS: Record<string, number> = { bool: 16, int4: 23, text: 25, float8: 701, timestamptz: 1184 };

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

const statements = () => preparedStatements().filter((s) => LINK_FLOW.includes(s.label));

describe.each(backends)("link flow fast-path row types on %s", (backend) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await openTestDatabase(backend);
  });
  afterAll(async () => {
    await db?.close();
  });

  it("covers every statement of the link flow", () => {
    expect(statements().map((s) => s.label).sort()).toEqual(LINK_FLOW);
  });

  it.each(statements().map((s) => [s.label, s] as const))("%s returns the columns its row type declares", async (_label, st) => {
    const params = Math.max(0, ...[...st.text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
    const fields = await describeStatement(db, st.text, params);
    const declared = Object.entries(st.columns as Record<string, PgType>).map(([name, type]) => ({ name, dataTypeID: OIDS[type] }));
    expect(fields.map((f) => ({ name: f.name, dataTypeID: f.dataTypeID }))).toEqual(declared);
  });
});
