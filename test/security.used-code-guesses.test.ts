// A state a right code used answers that code again while it lives (10 minutes), so a client
// that lost the answer can retry. Any other code sent to it was refused without being counted,
// so whoever held a used state's id could guess its code for the rest of those 10 minutes, five
// tries or a million: and a sign-in's state is bound to no account, its answer the tokens of the
// account that used it. A used state now takes no more wrong codes than a live one (5 in all):
// after them even the right code is refused (docs/security.md, "Abuse limits").
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

const WRONG_TRIES = 5;

describe.each(backends)("guesses at a used code on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const wrongFor = (otp: string) => (otp === "000000" ? "111111" : "000000");
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  /** Verifies with the right code, then with it again, then WRONG_TRIES wrong codes; returns the right code's last answer. */
  async function guessAfterUse(verify: (otp: string) => Promise<{ status: number; body: any }>, otp: string) {
    const first = await verify(otp);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const retried = await verify(otp);
    expect(retried.status, "a retry with the right code is answered again").toBe(200);
    for (let i = 0; i < WRONG_TRIES; i++) {
      const wrong = await verify(wrongFor(otp));
      expect(wrong.body.error).toBe("OTPInvalid");
    }
    return { first, retried, last: await verify(otp) };
  }

  it("a sign-in's state: five wrong codes after it was used, and its tokens are not answered again", async () => {
    const email = "used-sign-in@example.com";
    const start = await h.call("POST", "/auth/otp/start", { body: { email } });
    const otp = await h.mailbox.otp(email);
    const { first, retried, last } = await guessAfterUse((code) => h.call("POST", "/auth/otp/verify", { body: { state_id: start.body.state_id, otp: code } }), otp);
    expect(retried.body.account_id).toBe(first.body.account_id);
    expect(last.status).not.toBe(200);
    expect(last.body).toMatchObject({ error: "OTPInvalid" });
    expect(last.body.access_token).toBeUndefined();
  });

  it("a link's state: the same, for the account that used it", async () => {
    const user = await h.signIn({ email: "used-link-owner@example.com" });
    const added = "used-link-added@example.com";
    const request = await h.call("POST", "/users/link/request", { body: { email: added }, headers: bearer(user.token) });
    expect(request.status, JSON.stringify(request.body)).toBe(200);
    const otp = await h.mailbox.otp(added);
    const { first, retried, last } = await guessAfterUse(
      (code) => h.call("POST", "/users/link/verify", { body: { state_id: request.body.state_id, otp: code }, headers: bearer(user.token) }),
      otp,
    );
    expect(retried.body).toEqual(first.body);
    expect(last.body).toMatchObject({ error: "OTPInvalid" });
  });

  it("a re-authentication's state: the same, for the session that used it", async () => {
    const email = "used-reauth@example.com";
    const user = await h.signIn({ email });
    const start = await h.call("POST", "/auth/reauthenticate/start", { body: { email }, headers: bearer(user.token) });
    expect(start.status, JSON.stringify(start.body)).toBe(200);
    const otp = await h.mailbox.otp(email);
    const { last } = await guessAfterUse(
      (code) => h.call("POST", "/auth/reauthenticate/verify", { body: { state_id: start.body.state_id, otp: code }, headers: bearer(user.token) }),
      otp,
    );
    expect(last.body).toMatchObject({ error: "OTPInvalid" });
    expect(last.body.access_token).toBeUndefined();
  });
});
