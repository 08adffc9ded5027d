// Codes to one inbox or phone from many address groups (docs/security.md, "Abuse limits"). Sends
// were counted per identifier and address group, per address group and per project only: an IPv6
// subscriber holds 256 groups with a /56 of a home line (65,536 with a /48 from a tunnel broker),
// so one caller could send one victim the project's whole e-mail ceiling in an hour, 5,000 codes
// (29th review, with 200 from 40 groups of one /56). Now one identifier gets at most 60 codes an
// hour from everywhere but its known places together, and its owner still gets one at home.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";

const PER_IDENTIFIER = 60;

describe.each(backends)("code sends to one identifier from many address groups, on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const start = (email: string, from: string) => h.call("POST", "/auth/otp/start", { body: { email }, from });
  const codesTo = (email: string) => h.mailbox.messages.filter((m) => m.to === email).length;

  it(`stop at ${PER_IDENTIFIER} an hour from everywhere but the identifier's known places, which still get theirs`, async () => {
    const victim = "bombed@example.com";
    const home = "203.0.113.50";
    const first = await start(victim, home);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const signedIn = await h.call("POST", "/auth/otp/verify", { body: { state_id: first.body.state_id, otp: await h.mailbox.otp(victim) }, from: home });
    expect(signedIn.status, JSON.stringify(signedIn.body)).toBe(200);

    // one subscriber's /56: a /64 per request, each with a budget of its own per address group
    const statuses: number[] = [];
    for (let n = 0; n < PER_IDENTIFIER + 10; n++) statuses.push((await start(victim, `2001:db8:77:${n.toString(16)}::1`)).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(PER_IDENTIFIER - 1);
    expect(statuses.slice(PER_IDENTIFIER - 1).every((s) => s === 429)).toBe(true);
    const refused = await start(victim, "2001:db8:77:ff::1");
    expect(refused.body).toMatchObject({ error: "RateLimited" });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(codesTo(victim)).toBe(PER_IDENTIFIER - 1);

    // the owner at home is not refused, and another address is not held back by it
    const atHome = await start(victim, home);
    expect(atHome.status, JSON.stringify(atHome.body)).toBe(200);
    expect(codesTo(victim)).toBe(PER_IDENTIFIER);
    expect((await start("someone-else@example.com", "2001:db8:77:1::1")).status).toBe(200);
  });
});
