// Codes to one inbox or phone from many address groups (docs/security.md, "Abuse limits"). Sends
// were counted per identifier and address group, per address group and per project only: an IPv6
// subscriber holds 256 groups with a /56 of a home line (65,536 with a /48 from a tunnel broker),
// so one caller could send one victim the project's whole e-mail ceiling in an hour, 5,000 codes
// (29th review, with 200 from 40 groups of one /56). Now one identifier gets at most 200 codes an
// hour from everywhere but its known places together, and its owner still gets one at home. Only
// sends every narrower limit allowed count: counted with the others, one address sending 61
// times (56 of them refused) used up the first version's 60, and the owner got no code at a new
// place for the hour (29th review, of that version).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";

const PER_IDENTIFIER = 200;

describe.each(backends)("code sends to one identifier from many address groups, on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  // with the publishable key, as a stranger holds it
  const start = (email: string, from: string) => h.call("POST", "/auth/otp/start", { body: { email }, from, headers: { "x-api-key": h.publishableKey } });
  const codesTo = (email: string) => h.mailbox.messages.filter((m) => m.to === email).length;
  const alarms = () => h.db.prisma.outboxEvent.count({ where: { eventType: "security.suspicious_activity", body: { contains: `"reason":"sends_per_identifier"` } } });

  it("are not used up by one address whose own limit refuses it", async () => {
    const victim = "one-address@example.com";
    const statuses: number[] = [];
    for (let i = 0; i < PER_IDENTIFIER + 1; i++) statuses.push((await start(victim, "198.51.100.9")).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    // the owner at a place she never signed in from still gets a code
    expect((await start(victim, "192.0.2.77")).status).toBe(200);
  });

  it(`stop at ${PER_IDENTIFIER} an hour from everywhere but the identifier's known places, which still get theirs`, async () => {
    const victim = "bombed@example.com";
    const home = "203.0.113.50";
    const first = await start(victim, home);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const signedIn = await h.call("POST", "/auth/otp/verify", { body: { state_id: first.body.state_id, otp: await h.mailbox.otp(victim) }, from: home });
    expect(signedIn.status, JSON.stringify(signedIn.body)).toBe(200);

    // one subscriber's /48: a /64 per request, each with a budget of its own per address group
    const statuses: number[] = [];
    for (let n = 0; n < PER_IDENTIFIER + 5; n++) statuses.push((await start(victim, `2001:db8:77:${n.toString(16)}::1`)).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(PER_IDENTIFIER - 1);
    expect(statuses.slice(PER_IDENTIFIER - 1).every((s) => s === 429)).toBe(true);
    const refused = await start(victim, "2001:db8:77:ffff::1");
    expect(refused.body).toMatchObject({ error: "RateLimited" });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(codesTo(victim)).toBe(PER_IDENTIFIER - 1);
    // the project hears of it once, at the first refusal of the window
    expect(await alarms()).toBe(1);

    // the owner at home is not refused, and another address is not held back by it
    const atHome = await start(victim, home);
    expect(atHome.status, JSON.stringify(atHome.body)).toBe(200);
    expect(codesTo(victim)).toBe(PER_IDENTIFIER);
    expect((await start("someone-else@example.com", "2001:db8:77:1::1")).status).toBe(200);
  });

  // 31st review: each spelling was counted apart, and most providers deliver ada+anything@ to ada@
  it("are counted per inbox: sub-addresses and Gmail's dots reach one inbox and share its bound", async () => {
    const spellings = (n: number) => (n % 2 ? `inbox.owner+${n}@gmail.com` : `inboxowner+${n}@googlemail.com`);
    const statuses: number[] = [];
    for (let n = 0; n < PER_IDENTIFIER + 5; n++) statuses.push((await start(spellings(n), `2001:db8:78:${n.toString(16)}::1`)).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(PER_IDENTIFIER);
    expect(statuses.slice(PER_IDENTIFIER).every((s) => s === 429)).toBe(true);
    // another inbox of the same domain is not touched
    expect((await start("inbox.other@gmail.com", "2001:db8:78:ffff::1")).status).toBe(200);
  });
});
