// Whether a code has expired is decided on the database's clock (docs/operations.md, "Clocks"),
// which dated it: a state's expires_at is the database's now() plus 10 minutes. A retried verify of
// a code that already succeeded (a client that lost the answer) was checked against the serving
// gateway's own clock, so a gateway running 2 minutes behind still answered a re-authentication
// code's stored tokens up to 2 minutes after the code had expired, and one running ahead refused
// the retry early. The gateway's clock is moved with vitest's fake Date, which needs a database with
// a clock of its own: Postgres (PGlite runs in the gateway's process and reads the same Date).
import { decodeJwt } from "jose";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { serverUrl } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { bearer, gatewayClock } from "./support/clock.ts";

describe.skipIf(!serverUrl)("a retried code verify on a gateway whose clock is off the database's (postgres)", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness("postgres");
  });
  afterAll(() => h?.close());
  afterEach(() => {
    vi.useRealTimers();
  });


  it("a re-authentication code retried after it expired, by the database, is refused on a gateway running behind", async () => {
    gatewayClock(-2 * 60_000);
    const { token } = await h.signIn({ email: "retry@example.com" });
    const start = await h.call("POST", "/auth/reauthenticate/start", { body: { email: "retry@example.com" }, headers: bearer(token) });
    expect(start.status).toBe(200);
    const verify = { state_id: start.body.state_id, otp: await h.mailbox.otp("retry@example.com") };
    const first = await h.call("POST", "/auth/reauthenticate/verify", { body: verify, headers: bearer(token) });
    expect(first.status).toBe(200);
    expect(decodeJwt(first.body.access_token).sid).toBe(decodeJwt(token).sid);

    // within its 10 minutes the retry answers what the first verify did
    const retried = await h.call("POST", "/auth/reauthenticate/verify", { body: verify, headers: bearer(token) });
    expect(retried.status).toBe(200);

    // the code expired 30 s ago by the database; this gateway's clock is 2 minutes behind it
    await h.db.prisma.$executeRaw`UPDATE otp_states SET expires_at = (now() - interval '30 seconds') AT TIME ZONE 'UTC' WHERE id = ${verify.state_id}`;
    const late = await h.call("POST", "/auth/reauthenticate/verify", { body: verify, headers: bearer(first.body.access_token) });
    expect(late.status).toBe(400);
    expect(late.body.error).toBe("OTPInvalid");
  });
});
