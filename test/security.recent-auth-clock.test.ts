// Recent authentication is judged on the database's clock (docs/security.md, "Stolen sessions";
// docs/operations.md, "Clocks"). A session's auth_time is shared by every gateway: a sign-in
// writes it with the database's now(). It used to be compared with the clock of whichever gateway
// served the request, and a re-authentication wrote the clock of the gateway that served it, so a
// gateway whose clock ran behind kept a stale session's authentication recent for as long as it
// was behind, and one whose clock ran ahead dated a re-authentication into the future, recent that
// much longer on every gateway. Below the 50 s at which a gateway warns, nobody heard of it.
//
// A gateway's clock is moved with vitest's fake Date (only Date: timers run as usual). That
// needs a database with a clock of its own, Postgres; PGlite runs in the gateway's process and
// reads the same Date, so the two cannot differ there.
import { decodeJwt } from "jose";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { serverUrl } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { bearer, databaseNow, gatewayClock } from "./support/clock.ts";

const RECENT_SECONDS = 600;
const SKEW_MS = 2 * 60_000;

describe.skipIf(!serverUrl)("recent authentication with a gateway whose clock is off the database's (postgres)", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness("postgres", { env: { LINKGATE_RECENT_AUTH_SECONDS: String(RECENT_SECONDS) } });
  });
  afterAll(() => h?.close());
  afterEach(() => {
    vi.useRealTimers();
  });

  const authTimeOf = async (token: string) =>
    (await h.db.prisma.session.findUniqueOrThrow({ where: { id: decodeJwt(token).sid as string }, select: { authTime: true } })).authTime.getTime();

  it("a gateway whose clock is behind does not keep a stale session's authentication recent", async () => {
    gatewayClock(-SKEW_MS);
    const { token } = await h.signIn({ email: "behind@example.com" });
    // by the database, the session authenticated 30 s more than the window ago
    await h.db.prisma.$executeRaw`UPDATE sessions SET auth_time = auth_time - make_interval(secs => ${RECENT_SECONDS + 30}) WHERE id = ${decodeJwt(token).sid as string}`;

    const refused = await h.call("POST", "/users/link/request", { body: { email: "attacker@evil.example" }, headers: bearer(token) });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toBe("ReauthenticationRequired");
    expect(h.mailbox.messages.filter((m) => m.to === "attacker@evil.example")).toEqual([]);
  });

  it("a re-authentication on a gateway whose clock is ahead is dated by the database", async () => {
    gatewayClock(SKEW_MS);
    const { token } = await h.signIn({ email: "ahead@example.com" });
    await h.db.prisma.$executeRaw`UPDATE sessions SET auth_time = auth_time - make_interval(secs => ${RECENT_SECONDS + 30}) WHERE id = ${decodeJwt(token).sid as string}`;

    const start = await h.call("POST", "/auth/reauthenticate/start", { body: { email: "ahead@example.com" }, headers: bearer(token) });
    expect(start.status).toBe(200);
    const again = await h.call("POST", "/auth/reauthenticate/verify", {
      body: { state_id: start.body.state_id, otp: await h.mailbox.otp("ahead@example.com") },
      headers: bearer(token),
    });
    expect(again.status).toBe(200);
    const reauthenticatedAt = await authTimeOf(token);
    expect(reauthenticatedAt).toBeLessThanOrEqual(await databaseNow(h));
    expect(reauthenticatedAt).toBeGreaterThan((await databaseNow(h)) - 60_000);

    // and a session that re-authenticated 30 s less than the window ago, by the database, is
    // still recent on a gateway that runs ahead: its clock neither lengthens nor shortens the window
    await h.db.prisma.$executeRaw`UPDATE sessions SET auth_time = auth_time - make_interval(secs => ${RECENT_SECONDS - SKEW_MS / 1000 + 30}) WHERE id = ${decodeJwt(token).sid as string}`;
    const fresh = await h.call("POST", "/users/link/request", { body: { email: "ahead-second@example.com" }, headers: bearer(again.body.access_token) });
    expect(fresh.status).toBe(200);
  });
});
