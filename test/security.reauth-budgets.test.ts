// Re-authentication needs no recent sign-in, so any token of an account can ask for codes and
// type wrong ones, a stale or stolen one included. Its sends and wrong codes were counted per
// account, against the budgets the owner's own re-authentication and link requests spend: one
// stale token spent them (20 codes, 15 wrong ones) and the owner could neither re-authenticate
// nor add an address for an hour. They are now counted per session (docs/security.md, "Abuse
// limits"): the stale session is still bounded, and only its own budget runs out.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

const EMAIL = "owner@example.com";
/** Where the stale token is used from: never a place the owner signed in from. */
const ELSEWHERE = "198.51.100.7";
/** Its 15 wrong codes close ELSEWHERE to new codes for the e-mail; it carries on from here. */
const FURTHER = "198.51.100.8";

describe.each(backends)("a stale token and the owner's code budgets on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    // one address is enough for the stale token: the per-identifier-and-address limit is not what is tested
    h = await startHarness(backend, { limits: { sendsPerIdentifier: { max: 1000, windowSeconds: 600 } } });
  });
  afterAll(() => h?.close());

  const post = (path: string, token: string, body: object, from?: string) => h.call("POST", path, { body, headers: { authorization: `Bearer ${token}` }, from });

  it("leaves the owner's re-authentication and link requests alone after a stale token spent its own", async () => {
    const stale = await h.signIn({ email: EMAIL });
    const owner = await h.signIn({ email: EMAIL });

    // 15 wrong codes, five on each of three states, then codes up to the session's 20
    for (let s = 0; s < 3; s++) {
      const start = await post("/auth/reauthenticate/start", stale.token, { email: EMAIL }, ELSEWHERE);
      expect(start.status).toBe(200);
      for (let i = 0; i < 5; i++) {
        const wrong = await post("/auth/reauthenticate/verify", stale.token, { state_id: start.body.state_id, otp: "000000" }, ELSEWHERE);
        expect(wrong.body.error).toBe("OTPInvalid");
      }
    }
    for (let i = 3; i < 20; i++) expect((await post("/auth/reauthenticate/start", stale.token, { email: EMAIL }, FURTHER)).status).toBe(200);
    const spent = await post("/auth/reauthenticate/start", stale.token, { email: EMAIL }, FURTHER);
    expect(spent.status).toBe(429);
    expect(spent.body.error).toBe("RateLimited");

    const start = await post("/auth/reauthenticate/start", owner.token, { email: EMAIL });
    expect(start.status).toBe(200);
    const verified = await post("/auth/reauthenticate/verify", owner.token, { state_id: start.body.state_id, otp: await h.mailbox.otp(EMAIL) });
    expect(verified.status).toBe(200);
    const link = await post("/users/link/request", owner.token, { email: "second@example.com" });
    expect(link.status).toBe(200);
  });
});
