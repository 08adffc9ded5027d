// A passkey's signature counter is checked and raised in one step: of two sign-ins presenting
// the same counter at once (a cloned authenticator racing the real one), exactly one wins and
// the other is refused and reported like any counter that went backwards. On Postgres the two
// go to two linkgate processes. Authenticators that keep no counter (always 0) still sign in.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { startSecondProcess, type SecondProcess } from "./support/second-process.ts";

const ISSUER = "http://127.0.0.1:4000"; // RP id "localhost"; both processes share it
const ORIGIN = "http://localhost:4000";
const TRIALS = 5;

describe.each(backends)("passkey signature counters under concurrency on %s", (backend) => {
  let h: Harness;
  let second: SecondProcess | undefined;
  let n = 0;

  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_ISSUER: ISSUER } });
    if (backend === "postgres") second = await startSecondProcess(h);
  });
  afterAll(async () => {
    await second?.close();
    await h?.close();
  });

  /** A passkey REST call as an app with the publishable key, on this process (0) or the other one (1). */
  async function call(on: 0 | 1, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const headers: Record<string, string> = { "x-api-key": h.publishableKey, "content-type": "application/json" };
    const init = { method: "POST", headers, body: JSON.stringify(body ?? {}) };
    if (on === 1 && second) {
      const res = await second.fetch(path, init);
      return { status: res.status, body: await res.json() };
    }
    return h.call("POST", path, { body: body ?? {}, headers });
  }

  async function userWithPasskey() {
    const user = await h.signIn({ email: `counter.${++n}@example.com` });
    const headers = { authorization: `Bearer ${user.token}`, "x-api-key": h.publishableKey };
    const auth = new SoftAuthenticator(ORIGIN);
    const opts = await h.call("POST", "/auth/passkey/registration/options", { headers });
    const created = await h.call("POST", "/auth/passkey/registration/verify", { body: { response: auth.create(opts.body) }, headers });
    expect(created.status).toBe(200);
    return { user, auth, passkeyId: created.body.passkey.id as string };
  }

  /** Two sign-ins with the same counter, each on its own challenge, presented at once. */
  async function racePair(auth: SoftAuthenticator, counter: number) {
    const [a, b] = await Promise.all([call(0, "/auth/passkey/sign-in/options"), call(1, "/auth/passkey/sign-in/options")]);
    const responses = [auth.get(a.body, undefined, { counter }), auth.get(b.body, undefined, { counter })];
    return Promise.all([call(0, "/auth/passkey/sign-in/verify", { response: responses[0] }), call(1, "/auth/passkey/sign-in/verify", { response: responses[1] })]);
  }

  // In the order they were reported: rows written by two processes' connections need not come
  // back from a scan in that order, and the test reads the newest one.
  const regressions = async (passkeyId: string) =>
    (await h.db.prisma.outboxEvent.findMany({ where: { eventType: "security.suspicious_activity" }, orderBy: { seq: "asc" } }))
      .map((e) => JSON.parse(e.body).data)
      .filter((d) => d.reason === "passkey_counter_regressed" && d.passkey_id === passkeyId);

  it("of two sign-ins presenting the same counter at once, exactly one signs in; the other is refused and reported", async () => {
    const { user, auth, passkeyId } = await userWithPasskey();
    for (let trial = 1; trial <= TRIALS; trial++) {
      const counter = trial * 10;
      const results = await racePair(auth, counter);
      const statuses = results.map((r) => r.status).sort();
      expect(statuses, `trial ${trial}`).toEqual([200, 400]);
      expect(results.find((r) => r.status === 200)!.body).toMatchObject({ account_id: user.accountId });
      expect(results.find((r) => r.status === 400)!.body).toMatchObject({ error: "PasskeyInvalid", message: expect.stringMatching(/counter/) });
      const reports = await regressions(passkeyId);
      expect(reports).toHaveLength(trial);
      expect(reports.at(-1)).toMatchObject({ user_id: user.accountId, stored_counter: counter, presented_counter: counter });
    }
    const stored = await h.db.prisma.passkey.findUniqueOrThrow({ where: { id: passkeyId } });
    expect(stored.counter).toBe(BigInt(TRIALS * 10));
  });

  it("a counter that grows signs in every time; one that goes back is still refused", async () => {
    const { auth, passkeyId } = await userWithPasskey();
    for (const counter of [1, 2, 7]) {
      const opts = await call(0, "/auth/passkey/sign-in/options");
      expect((await call(1, "/auth/passkey/sign-in/verify", { response: auth.get(opts.body, undefined, { counter }) })).status).toBe(200);
    }
    const opts = await call(1, "/auth/passkey/sign-in/options");
    expect((await call(0, "/auth/passkey/sign-in/verify", { response: auth.get(opts.body, undefined, { counter: 7 }) })).status).toBe(400);
    expect(await regressions(passkeyId)).toHaveLength(1);
  });

  it("an authenticator without a counter (always 0) signs in, also twice at once", async () => {
    const { user, auth, passkeyId } = await userWithPasskey();
    const results = await racePair(auth, 0);
    expect(results.map((r) => r.status)).toEqual([200, 200]);
    for (const r of results) expect(r.body).toMatchObject({ account_id: user.accountId });
    expect(await regressions(passkeyId)).toHaveLength(0);
    const stored = await h.db.prisma.passkey.findUniqueOrThrow({ where: { id: passkeyId } });
    expect(stored.counter).toBe(0n);
    expect(Math.abs(stored.lastUsedAt!.getTime() - Date.now())).toBeLessThan(60_000);
  });
});
