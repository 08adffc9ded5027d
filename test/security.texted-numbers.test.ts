// Texts the operator pays for (31st review): sign-in and link codes were texted to premium-rate
// numbers (+1 900, +44 909), which bill the sender, and to numbers of no country (+882, an
// international network), where SMS pumping sends its texts, bounded only by the project's hourly
// ceilings. Now no code is texted to those, and LINKGATE_SMS_COUNTRIES names the countries that
// are (docs/security.md, "Texts"); a refused number spends no budget.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../src/config.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";

describe("LINKGATE_SMS_COUNTRIES", () => {
  it("takes ISO 3166 country codes in any case, and refuses anything else in one line", () => {
    expect(loadConfig({ LINKGATE_SMS_COUNTRIES: "us, ca,GB" }).smsCountries).toEqual(["US", "CA", "GB"]);
    expect(loadConfig({}).smsCountries).toEqual([]);
    for (const value of ["USA", "US,XX", "1"]) {
      expect(() => loadConfig({ LINKGATE_SMS_COUNTRIES: value })).toThrow(ConfigError);
      expect(() => loadConfig({ LINKGATE_SMS_COUNTRIES: value })).toThrow(/^invalid configuration: LINKGATE_SMS_COUNTRIES must list ISO 3166 country codes/);
    }
  });
});

describe.each(backends)("the phones codes are texted to, on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_SMS_COUNTRIES: "US,CA" } });
  });
  afterAll(() => h?.close());

  const texts = (phone: string) => h.mailbox.messages.filter((m) => m.to === phone).length;
  const counters = () => h.db.prisma.rateLimit.count();

  it("never a premium-rate number, a number of no country, or one of a country not listed; nothing is counted", async () => {
    const before = await counters();
    for (const [phone, why] of [
      ["+19002001234", /premium-rate/],
      ["+449098790000", /premium-rate/],
      ["+8823451234567", /no country/],
      ["+33612345678", /this country \(FR\)/],
    ] as const) {
      const start = await h.call("POST", "/auth/otp/start", { body: { phone } });
      expect(start.status, phone).toBe(400);
      expect(start.body).toEqual({ error: "InvalidIdentifier", message: expect.stringMatching(why) });
      expect(texts(phone)).toBe(0);
    }
    expect(await counters()).toBe(before);
  });

  it("a link request to such a number is refused alike; a listed country's phone gets its code", async () => {
    const user = await h.signIn({ phone: "+1 202 555 0143" });
    const refused = await h.call("POST", "/users/link/request", { body: { phone: "+19002001234" }, headers: { authorization: `Bearer ${user.token}` } });
    expect(refused.body.error).toBe("InvalidIdentifier");
    const linked = await h.call("POST", "/users/link/request", { body: { phone: "+1 416 555 0199" }, headers: { authorization: `Bearer ${user.token}` } });
    expect(linked.status, JSON.stringify(linked.body)).toBe(200);
    expect(await h.mailbox.otp("+14165550199")).toMatch(/^\d{6}$/);
  });
});
