// Resolving a webhook's host (30th review). The system resolver runs on libuv's thread pool, at
// most two lookups at a time for the whole process, with no deadline of ours: a project pointing
// its webhooks at a domain whose name server never answers held the attempt for 10 to 30 s, past
// its timeout and the worker's stop, and held up every other lookup in the process (other
// projects' deliveries, the SMTP server's name, identity providers). The guard now asks DNS
// itself, on the event loop, within the attempt's deadline. A name server on loopback here.
import { lookup } from "node:dns/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSender } from "../src/delivery/sender.ts";
import { assertSafeTarget, dnsResolver, UnsafeWebhookTarget } from "../src/webhooks/target-guard.ts";
import { generateWebhookSecret } from "../src/webhooks/secrets.ts";
import { startNameServer, type NameServer } from "./support/dns-server.ts";

// A name whose answer lists 1,500 public addresses (one over TCP holds up to about 4,000 A
// records; this one fits a datagram), with a private one after them.
const CROWD = Array.from({ length: 1_500 }, (_, i) => `93.184.${i >> 8}.${i & 255}`);

describe("a webhook host's name, resolved by the guard", () => {
  let ns: NameServer;
  beforeAll(async () => {
    ns = await startNameServer({
      a: { "hooks.example.test": ["93.184.216.34"], "inside.example.test": ["10.1.2.3"], "fresh.example.test": ["93.184.216.35"], "brief.example.test": ["93.184.216.36"], "crowd.example.test": [...CROWD, "10.0.0.1"] },
      silent: ["hang.example.test"],
      ttl: { "fresh.example.test": 0, "brief.example.test": 5 },
    });
  });
  afterAll(() => ns?.close());

  const resolver = (timeoutMs = 300) => dnsResolver({ servers: [ns.address], timeoutMs, tries: 1 });

  it("asks the name server for both families and checks every address it names", async () => {
    expect(await resolver()("hooks.example.test")).toEqual([{ address: "93.184.216.34", family: 4 }]);
    expect(ns.queries).toEqual(expect.arrayContaining(["A hooks.example.test", "AAAA hooks.example.test"]));
    expect(await assertSafeTarget("https://hooks.example.test/hook", { allowPrivate: false, lookup: resolver() })).toEqual([{ address: "93.184.216.34", family: 4 }]);
    await expect(assertSafeTarget("https://inside.example.test/hook", { allowPrivate: false, lookup: resolver() })).rejects.toThrow(/resolves to a private address;/);
    await expect(assertSafeTarget("https://nope.example.test/hook", { allowPrivate: false, lookup: resolver() })).rejects.toThrow(/could not be resolved \(ENOTFOUND\)/);
  });

  it("an answer is used for as long as its TTL allows, and attempts at the same time share one question", async () => {
    let clock = 0;
    const lookup = dnsResolver({ servers: [ns.address], timeoutMs: 300, tries: 1, now: () => clock });
    const asked = (name: string) => ns.queries.filter((q) => q === `A ${name}`).length;
    const before = asked("brief.example.test");
    // 2,000 deliveries a second to one host asked the name server twice each (A and AAAA)
    await Promise.all(Array.from({ length: 50 }, () => assertSafeTarget("https://brief.example.test/hook", { allowPrivate: false, lookup })));
    for (let i = 0; i < 50; i++) await assertSafeTarget("https://brief.example.test/hook", { allowPrivate: false, lookup });
    expect(asked("brief.example.test") - before).toBe(1);
    // its owner said 5 s: asked again after that, and every address is checked again
    clock += 5_001;
    expect(await lookup("brief.example.test")).toEqual([{ address: "93.184.216.36", family: 4 }]);
    expect(asked("brief.example.test") - before).toBe(2);
    // a TTL of 0 keeps nothing: every attempt asks
    const fresh = asked("fresh.example.test");
    for (let i = 0; i < 3; i++) await lookup("fresh.example.test");
    expect(asked("fresh.example.test") - fresh).toBe(3);
    // a failure is not kept either
    const nope = asked("nope.example.test");
    for (let i = 0; i < 2; i++) await expect(lookup("nope.example.test")).rejects.toThrow();
    expect(asked("nope.example.test") - nope).toBe(2);
  });

  it("a name with 1,500 addresses costs no more than one with 16: the first 16 of each family are checked, kept and connected to", async () => {
    // Every address was checked at every attempt (4,000 took 0.1 to 0.2 s of the event loop)
    // and kept, with the answer for its TTL and in the sender's pinned addresses (a quarter of
    // a MB a host, for up to 10,000 hosts): one project's zone could stall every project's
    // deliveries, or fill a worker's memory. The private address after them is never reached.
    const first16 = CROWD.slice(0, 16).map((address) => ({ address, family: 4 }));
    expect(await resolver(2_000)("crowd.example.test")).toEqual(first16);
    expect(await assertSafeTarget("https://crowd.example.test/hook", { allowPrivate: false, lookup: resolver(2_000) })).toEqual(first16);
    // whatever resolves the host (the system resolver in local development, a test's table)
    const table = async () => [...CROWD.map((address) => ({ address, family: 4 })), { address: "2606:4700::1", family: 6 }];
    expect(await assertSafeTarget("https://crowd.example.test/hook", { allowPrivate: false, lookup: table })).toEqual([...first16, { address: "2606:4700::1", family: 6 }]);
  });

  it("an answer is kept 60 s at most, whatever its TTL", async () => {
    let clock = 0;
    const lookup = dnsResolver({ servers: [ns.address], timeoutMs: 300, tries: 1, now: () => clock });
    const asked = () => ns.queries.filter((q) => q === "A hooks.example.test").length;
    const before = asked();
    await lookup("hooks.example.test");
    clock += 59_000;
    await lookup("hooks.example.test");
    expect(asked() - before).toBe(1);
    clock += 1_001;
    await lookup("hooks.example.test");
    expect(asked() - before).toBe(2);
  });

  it("a name server that never answers is a refusal, and the system's lookups do not wait behind it", async () => {
    const settled: string[] = [];
    const hung = Array.from({ length: 6 }, () =>
      assertSafeTarget("https://hang.example.test/hook", { allowPrivate: false, lookup: resolver(1_000) }).then(
        () => settled.push("hang resolved"),
        (err) => settled.push(err instanceof UnsafeWebhookTarget ? "hang refused" : `hang: ${err}`),
      ),
    );
    // the process's own resolver (the thread pool) answers at once, before any of them gives up
    await lookup("localhost");
    settled.push("localhost");
    await Promise.all(hung);
    expect(settled).toEqual(["localhost", ...Array(6).fill("hang refused")]);
  });

  it("an attempt's deadline covers resolving: a host that does not resolve in time fails the attempt as a timeout", async () => {
    const sender = createSender({ timeoutMs: 300, allowPrivate: false, lookup: resolver(60_000) });
    try {
      const input = { url: "https://hang.example.test/hook", body: "{}", eventId: "evt_1", eventType: "user.created", attempt: 1, secrets: { current: generateWebhookSecret() } };
      const timedOut = await sender.send(input);
      expect(timedOut).toMatchObject({ statusCode: null, reached: false, error: "timeout: the host did not resolve within 300 ms" });
      // a worker that stops does not wait for the name server either
      const stop = new AbortController();
      const stopped = sender.send(input, stop.signal);
      stop.abort();
      expect(await stopped).toMatchObject({ reached: false, error: "aborted: the worker stopped before the host resolved" });
    } finally {
      await sender.close();
    }
  });
});
