// Guessing a link code past the identifier's cap (docs/security.md, "Abuse limits"): once an
// identifier took its hourly wrong codes from everywhere, no code for it is judged except from
// one of its known places. A link state opened before the cap was reached used to be judged
// anyway, so an attacker holding link states (a few per account and address) kept guessing at
// the victim's e-mail after sign-in verifies were refused, and a right guess merged the
// victim's account into theirs.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** 100 wrong sign-in codes for `email` from 20 addresses: the identifier's hourly cap. */
async function exhaustIdentifierCap(h: Harness, email: string): Promise<void> {
  let wrong = 0;
  for (let a = 0; a < 20 && wrong < 100; a++) {
    const from = `198.51.100.${a + 1}`;
    for (let s = 0; s < 3 && wrong < 100; s++) {
      const st = await h.call("POST", "/auth/otp/start", { body: { email }, from });
      expect(st.status).toBe(200);
      const right = await h.mailbox.otp(email);
      for (let i = 0; i < 5 && wrong < 100; i++) {
        const guess = await h.call("POST", "/auth/otp/verify", { body: { state_id: st.body.state_id, otp: right === "000000" ? "111111" : "000000" }, from });
        expect(guess.body.error).toBe("OTPInvalid");
        wrong++;
      }
    }
  }
}

describe.each(backends)("a link verify past the identifier's wrong-code cap on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  it("is refused before its code is judged, even for a state opened before the cap, except from the identifier's known place", async () => {
    const victim = "victim@example.com";
    const home = "203.0.113.44";
    const signedIn = await h.call("POST", "/auth/otp/start", { body: { email: victim }, from: home });
    const own = await h.call("POST", "/auth/otp/verify", { body: { state_id: signedIn.body.state_id, otp: await h.mailbox.otp(victim) }, from: home });
    expect(own.status).toBe(200);

    const attacker = await h.signIn({ email: "attacker@evil.example" });
    const elsewhere = "192.0.2.66";
    const requested = await h.call("POST", "/users/link/request", { body: { email: victim }, headers: bearer(attacker.token), from: elsewhere });
    expect(requested.status).toBe(200);
    const code = await h.mailbox.otp(victim);

    await exhaustIdentifierCap(h, victim);

    const verify = (otp: string, from: string) =>
      h.call("POST", "/users/link/verify", { body: { state_id: requested.body.state_id, otp }, headers: bearer(attacker.token), from });
    const wrong = await verify(code === "000000" ? "111111" : "000000", elsewhere);
    expect(wrong.status).toBe(429);
    expect(wrong.body.error).toBe("RateLimited");
    expect(Number(wrong.headers.get("retry-after"))).toBeGreaterThan(0);
    const right = await verify(code, elsewhere);
    expect(right.status).toBe(429);
    const state = await h.db.prisma.otpState.findUniqueOrThrow({ where: { id: requested.body.state_id } });
    expect(state.attempts).toBe(0); // neither try was judged, so neither was counted
    expect(state.consumedAt).toBeNull();
    const victimAccount = await h.db.prisma.account.findUniqueOrThrow({ where: { id: own.body.account_id } });
    expect(victimAccount.mergeRole).toBeNull();

    // from the place the identifier signs in at, the code is judged as usual
    const fromHome = await verify(code, home);
    expect(fromHome.status, JSON.stringify(fromHome.body)).toBe(200);
    expect(fromHome.body.outcome).toBe("merged");
  });
});
