// A forged page cursor is bad input on every connection, never an internal error: Pothos'
// cursors are base64 of "GPC:<type>:<value>" and a client can send any bytes.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

const FORGED = ["GPC:N:NaN", "GPC:J:{}", "GPC:D:99999999999999999", "GPC:S:\u0000x", "not base64 at all!"].map((c) => Buffer.from(c).toString("base64"));

describe.each(backends)("forged cursors on %s", (backend) => {
  let h: Harness;
  let token: string;
  beforeAll(async () => {
    h = await startHarness(backend);
    token = (await h.signIn({ email: "cursor@example.com" })).token;
  });
  afterAll(() => h?.close());

  it.each(["sessions", "passkeys"])("viewer.%s refuses every forged cursor with BAD_USER_INPUT", async (field) => {
    for (const c of FORGED) {
      for (const arg of ["after", "before"]) {
        const r = await h.gql(`query($c: String) { viewer { ${field}(${arg}: $c) { edges { cursor } } } }`, { c }, { authorization: `Bearer ${token}` });
        expect(r.status, `${field}(${arg}: ${c})`).toBeLessThan(500);
        expect(r.body.errors?.[0]?.extensions?.code, `${field}(${arg}: ${c}): ${JSON.stringify(r.body)}`).toBe("BAD_USER_INPUT");
      }
    }
  });
});
