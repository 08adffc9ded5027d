// A recipient the e-mail or SMS transport refuses is bad input, not a crash (docs/security.md,
// "Input, tenants and pages"). An SMS gateway answers 400 for a number that cannot take texts (a
// landline that libphonenumber accepts as valid); a mail server refuses an address at RCPT TO.
// Both were a 500 after three tries; each try to a gateway can be a paid text. Now a refusal is
// 400 InvalidIdentifier after one try, a transport outage is 503 with Retry-After after three,
// and in both cases no code is left behind.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

const LANDLINE = "+442079460018";

describe.each(backends)("refused recipients on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const codesFor = (value: string) => h.db.prisma.otpState.count({ where: { value } });

  it("answers 400 InvalidIdentifier when the SMS gateway refuses the number, after one try, and keeps no code", async () => {
    h.mailbox.refuse(LANDLINE, 400);
    const r = await h.call("POST", "/auth/otp/start", { body: { phone: LANDLINE } });
    expect(r.status).toBe(400);
    expect(r.body).toEqual({ error: "InvalidIdentifier", message: "that phone number cannot receive texts" });
    expect(h.mailbox.tries(LANDLINE)).toBe(1);
    expect(await codesFor(LANDLINE)).toBe(0);
  });

  it("gives GraphQL the typed InvalidIdentifier when the mail server refuses the address for good", async () => {
    const email = "no-such-mailbox@example.com";
    h.mailbox.refuse(email, 550);
    const r = await h.gql(`mutation($e: String) { startSignIn(email: $e) { __typename ... on Error { message } } }`, { e: email });
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.startSignIn).toEqual({ __typename: "InvalidIdentifier", message: "that e-mail address does not accept mail" });
    expect(h.mailbox.tries(email)).toBe(1);
    expect(await codesFor(email)).toBe(0);
  });

  it("answers 503 with Retry-After when a transport keeps failing, after three tries, and keeps no code", async () => {
    const phone = "+14155550142";
    h.mailbox.refuse(phone, 503);
    const sms = await h.call("POST", "/auth/otp/start", { body: { phone } });
    expect(sms.status).toBe(503);
    expect(sms.body).toEqual({ error: "ServiceUnavailable", message: "the code could not be sent; try again shortly" });
    expect(sms.headers.get("retry-after")).toBe("30");
    expect(h.mailbox.tries(phone)).toBe(3);
    expect(await codesFor(phone)).toBe(0);

    const email = "greylisted@example.com";
    h.mailbox.refuse(email, 451);
    const mail = await h.call("POST", "/auth/otp/start", { body: { email } });
    expect(mail.status).toBe(503);
    expect(h.mailbox.tries(email)).toBe(3);
    expect(await codesFor(email)).toBe(0);
  });

  it("still sends to everyone else", async () => {
    const r = await h.call("POST", "/auth/otp/start", { body: { phone: "+14155550143" } });
    expect(r.status).toBe(200);
    expect(await h.mailbox.otp("+14155550143")).toMatch(/^\d{6}$/);
  });
});
