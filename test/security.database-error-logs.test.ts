// "No secret in any log" (docs/security.md, "Logs"), for an unexpected database error too. The
// drivers put the values of the statement that failed in the error: Postgres' `detail` ("Failing
// row contains (…)": every column of the row, the address and the code's hash among them), the
// message of a value of the wrong type (`invalid input syntax for type uuid: "…"`), PGlite's
// `params` (every value given); Prisma carries the driver's under meta.driverAdapterError. Each
// was written into the `unexpected error` line. The faults here are real, not stubs: a check
// constraint an operator added to a table (a schema that drifted), which the statement breaks.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../src/log.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";

describe.each(backends)("an unexpected database error's log lines on %s", (backend) => {
  const raw: string[] = [];
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend, { logger: createLogger("info", { write: (line: string) => void raw.push(line) }) });
  });
  afterAll(() => h?.close());

  /** The lines `request` writes while otp_states has the check `check`: what it answered, and the text of those lines. */
  async function withDriftedStates(check: string, request: () => Promise<{ status: number; body: any }>) {
    await h.db.prisma.$executeRawUnsafe(`ALTER TABLE otp_states ADD CONSTRAINT drifted CHECK (${check}) NOT VALID`);
    const before = raw.length;
    try {
      const answer = await request();
      const lines = raw.slice(before);
      return { answer, text: lines.join(""), errors: lines.map((l) => JSON.parse(l)).filter((l) => l.level >= 50) };
    } finally {
      await h.db.prisma.$executeRawUnsafe(`ALTER TABLE otp_states DROP CONSTRAINT drifted`);
    }
  }

  it("a failing row on the driver's path (a code sent): logged with its constraint, not its values (the address, the code's hash)", async () => {
    const email = "failing-row@example.com";
    const { answer, text, errors } = await withDriftedStates("false", () => h.call("POST", "/auth/otp/start", { body: { email } }));
    expect(answer.status).toBe(500);
    expect(errors).toContainEqual(expect.objectContaining({ msg: "unexpected error", err: expect.objectContaining({ message: expect.stringContaining("drifted") }) }));
    expect(text).not.toContain(email);
    expect(text).not.toContain("Failing row");
    expect(text).not.toMatch(/"params"/);
  });

  it("a value of the wrong type: the message names the type, not the value", async () => {
    const email = "wrong-type@example.com";
    const { answer, text, errors } = await withDriftedStates("value::uuid IS NOT NULL", () => h.call("POST", "/auth/otp/start", { body: { email } }));
    expect(answer.status).toBe(500);
    expect(errors).toContainEqual(expect.objectContaining({ msg: "unexpected error", err: expect.objectContaining({ message: expect.stringContaining("invalid input syntax for type uuid") }) }));
    expect(text).not.toContain(email);
  });

  it("a failing row through Prisma (a wrong code to link an address): its values are not logged either", async () => {
    const owner = await h.signIn({ email: "link-owner@example.com" });
    const auth = { authorization: `Bearer ${owner.token}` };
    const email = "linked-later@example.com";
    const requested = await h.call("POST", "/users/link/request", { body: { email }, headers: auth });
    expect(requested.status).toBe(200);
    const code = await h.mailbox.otp(email);
    const wrong = code.slice(0, 5) + String((Number(code[5]) + 1) % 10);
    // a wrong code counts a try: the row updated fails the check
    const { answer, text, errors } = await withDriftedStates("attempts = 0", () =>
      h.call("POST", "/users/link/verify", { body: { state_id: requested.body.state_id, otp: wrong }, headers: auth }),
    );
    expect(answer.status).toBe(500);
    expect(errors).toContainEqual(expect.objectContaining({ msg: "unexpected error", err: expect.objectContaining({ message: expect.stringContaining("drifted") }) }));
    expect(text).not.toContain(email);
    expect(text).not.toContain("Failing row");
  });
});
