// A request an abuse limit refuses stores nothing new (docs/security.md, "Abuse limits"). Every
// code start counts the identifier from the caller's address (`send:ida:…`) beside the address's
// own budget, and that counter was created even when the address's budget had already refused
// the call: one address past its 30 sends an hour wrote a new rate_limits row with every start to
// a fresh address, 2,000 rows for 2,000 refused requests, and the table grew as fast as anyone
// could send until the sweep came. A counter that exists still counts a refused call; one that
// does not is not made for it.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

describe.each(backends)("counters of refused requests on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_LIMIT_SENDS_PER_ADDRESS_HOURLY: "5" } });
  });
  afterAll(() => h?.close());

  const rows = async () => h.db.prisma.rateLimit.count();
  const start = (email: string, from: string) =>
    h.call("POST", "/auth/otp/start", { body: { email }, headers: { "x-api-key": h.publishableKey }, from });

  it("an address past its budget makes no new counter with each fresh identifier it asks a code for", async () => {
    const from = "198.51.100.7";
    for (let i = 0; i < 5; i++) expect((await start(`ok-${i}@example.com`, from)).status).toBe(200);
    const afterAllowed = await rows();

    for (let i = 0; i < 100; i++) {
      const res = await start(`${randomBytes(6).toString("hex")}@example.com`, from);
      expect(res.status).toBe(429);
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    }
    expect(await rows()).toBe(afterAllowed);

    // an identifier it already counted is still counted when refused
    const again = await start("ok-0@example.com", from);
    expect(again.status).toBe(429);
    const counted = await h.db.prisma.rateLimit.findMany({ where: { key: { startsWith: "send:ida:" } } });
    expect(counted.filter((r) => r.key.includes("ok-0@example.com")).map((r) => r.count)).toEqual([2]);

    // another address is not affected
    expect((await start(`${randomBytes(6).toString("hex")}@example.com`, "203.0.113.9")).status).toBe(200);
  });
});
