// Fair under slow receivers: each endpoint earns its concurrency by answering, a circuit breaker
// stops sending to one that does not (one probe at a time once its open period passes), and a
// healthy webhook's deliveries never wait behind a dead one's. Real receivers on loopback, a
// real database per backend; a short send timeout keeps it fast, and every assertion is on
// counts and order, never on speed.
import { describe, expect, it } from "vitest";
import { EndpointBreakers, INITIAL_LIMIT, verdictOf, type Transition } from "../src/delivery/breaker.ts";
import { claimDue, releaseLeases } from "../src/delivery/sql.ts";
import type { DeliveryWorker, WorkerOptions } from "../src/delivery/worker.ts";
import { backends } from "./support/db.ts";
import { deliveryWorld } from "./support/delivery-world.ts";
import { enqueueEvents, eventually, newMasterKey, seedWebhook, type Behaviour, type SeededWebhook } from "./support/receiver.ts";

/** Short, so that dead endpoints fail fast; long enough that a loaded machine never times out a live one. */
const TIMEOUT_MS = 1_500;
const SCHEDULE = [50, 50, 50, 50, 50];
/** A receiver that never answers within the test. */
const HANG: Behaviour = { status: 200, delayMs: 60_000 };

describe("endpoint breakers (the rules, on a clock of their own)", () => {
  const settings = { failures: 3, openMs: 1_000, maxOpenMs: 4_000 };

  it("an unknown endpoint gets INITIAL_LIMIT; prompt answers raise it to the cap, slow ones lower it", () => {
    const b = new EndpointBreakers(20, settings);
    expect(b.room("wh_a", 0)).toBe(INITIAL_LIMIT);
    for (let i = 0; i < 30; i++) {
      b.taken("wh_a", 0);
      b.finished("wh_a", "answered", 0);
    }
    expect(b.stateOf("wh_a", 0)).toEqual({ state: "closed", limit: 20, active: 0 });
    b.taken("wh_a", 0);
    b.finished("wh_a", "slow", 0);
    expect(b.stateOf("wh_a", 0).limit).toBe(19);
  });

  it("stalls halve the limit, `failures` in a row open it; open → one probe → closed, or open again for twice as long", () => {
    const moves: Transition[] = [];
    const b = new EndpointBreakers(20, settings, (t) => moves.push(t));
    for (let i = 0; i < INITIAL_LIMIT; i++) b.taken("wh_a", 0);
    expect(b.room("wh_a", 0)).toBe(0);
    b.finished("wh_a", "stalled", 10);
    expect(b.stateOf("wh_a", 10)).toMatchObject({ state: "closed", limit: INITIAL_LIMIT / 2 });
    b.finished("wh_a", "stalled", 10);
    b.finished("wh_a", "stalled", 10);
    expect(b.stateOf("wh_a", 10).state).toBe("open");
    expect([b.room("wh_a", 500), b.mayStart("wh_a", 500), b.nextProbeAt()]).toEqual([0, false, 1_010]);
    b.finished("wh_a", "stalled", 600); // a send from before it opened: no change
    expect(b.nextProbeAt()).toBe(1_010);

    expect(b.room("wh_a", 1_010)).toBe(1); // half-open: one probe
    b.taken("wh_a", 1_010);
    expect(b.room("wh_a", 1_010)).toBe(0);
    b.finished("wh_a", "stalled", 1_200);
    expect(b.stateOf("wh_a", 1_200).state).toBe("open");
    expect(b.nextProbeAt()).toBe(3_200); // 2 × 1,000 ms

    expect(b.room("wh_a", 3_200)).toBe(1);
    b.taken("wh_a", 3_200);
    b.finished("wh_a", "answered", 3_300);
    expect(b.stateOf("wh_a", 3_300)).toEqual({ state: "closed", limit: 1, active: 0 });
    expect(moves.map((m) => m.to)).toEqual(["open", "half-open", "open", "half-open", "closed"]);
  });

  it("quick failures halve the limit but never open the breaker: they hold no slot, and the schedule governs their retries", () => {
    const b = new EndpointBreakers(20, settings);
    for (let i = 0; i < 10; i++) {
      b.taken("wh_a", 0);
      b.finished("wh_a", "failed", 0);
    }
    expect(b.stateOf("wh_a", 0)).toEqual({ state: "closed", limit: 1, active: 0 });
  });

  it("the claim hears of every endpoint whose room is not an unknown one's; idle healthy ones are forgotten", () => {
    const b = new EndpointBreakers(20, settings);
    b.taken("wh_busy", 0);
    for (let i = 0; i < 3; i++) b.finished("wh_dead", "stalled", 0);
    b.taken("wh_idle", 0);
    b.finished("wh_idle", "neutral", 0);
    expect(b.claimRooms(100)).toEqual({ webhookIds: ["wh_busy", "wh_dead"], rooms: [INITIAL_LIMIT - 1, 0], otherwise: INITIAL_LIMIT });
    b.finished("wh_busy", "answered", 100);
    // Later: the answered ones are forgotten, the dead one may be probed.
    expect(b.claimRooms(100_000)).toEqual({ webhookIds: ["wh_dead"], rooms: [1], otherwise: INITIAL_LIMIT });
  });

  it("judges attempts: no answer, 429 and 5xx fail (stall past half the timeout); other answers count; attempts that never left say nothing, unless their host was that slow to resolve", () => {
    const v = (statusCode: number | null, durationMs = 5, reached = true) => verdictOf({ statusCode, durationMs, reached }, 1_000);
    expect([v(null), v(429), v(503), v(null, 1_000), v(503, 600), v(200), v(404), v(410), v(200, 800), v(null, 0, false), v(null, 600, false)]).toEqual([
      "failed", "failed", "failed", "stalled", "stalled", "answered", "answered", "answered", "slow", "neutral", "stalled",
    ]);
  });
});

describe.each(backends)("fair delivery under slow receivers on %s", (backend) => {
  const world = deliveryWorld(backend);
  const { receiver } = world;
  const masterKey = newMasterKey();

  function worker(opts: Partial<WorkerOptions> & { breaker: { failures: number; openMs: number; maxOpenMs: number } }): DeliveryWorker {
    const config = { retryScheduleMs: SCHEDULE, webhookTimeoutMs: TIMEOUT_MS, webhookAllowPrivate: true, webhookBreaker: opts.breaker };
    return world.worker({ masterKey, logger: world.logger, pollMs: 100, maintenanceIntervalMs: 0, ...opts, config });
  }
  const breakerMoves = (webhookId: string) => world.logs.filter((l) => l.obj.webhookId === webhookId && String(l.obj.event).startsWith("webhook.breaker.")).map((l) => l.obj.event);
  const attemptsOf = (webhookId: string) =>
    world.db.prisma.deliveryAttempt.findMany({ where: { delivery: { webhookId } }, orderBy: { startedAt: "asc" } });

  it("the claim takes no delivery of an endpoint with no room, at most its room of a listed one, and the default of the rest", async () => {
    const a = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/a" });
    const project = a.projectId;
    const b = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/b", projectId: project });
    const c = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/c", projectId: project });
    await enqueueEvents(world.db, project, 10, { perTx: 10 });
    const claimed = await claimDue(world.db, {
      workerId: "fair",
      limit: 100,
      leaseMs: 30_000,
      perWebhookCap: 20,
      endpointRooms: { webhookIds: [a.webhookId, b.webhookId], rooms: [0, 2], otherwise: 3 },
    });
    const per = (id: string) => claimed.filter((x) => x.webhookId === id).length;
    expect([per(a.webhookId), per(b.webhookId), per(c.webhookId)]).toEqual([0, 2, 3]);
    // Out of the way of the tests below.
    await releaseLeases(world.db, "fair", claimed.map((x) => x.deliveryId));
    await world.db.prisma.webhook.updateMany({ where: { projectId: project }, data: { enabled: false } });
  });

  it("opens on a receiver that hangs, probes it with one delivery, and closes when it answers again", async () => {
    const r = await receiver(HANG);
    const hook = await seedWebhook(world.db, masterKey, { url: r.url });
    await enqueueEvents(world.db, hook.projectId, 30, { perTx: 30 });
    const w = worker({ concurrency: 20, perWebhookCap: 20, breaker: { failures: 3, openMs: 1_000, maxOpenMs: 1_000 } });

    await eventually(async () => w.endpoint(hook.webhookId).state === "open", 10_000, "the breaker to open");
    // The endpoint got the concurrency of an unknown one, all of which timed out; not one more.
    await eventually(async () => (await attemptsOf(hook.webhookId)).length === INITIAL_LIMIT, 10_000, "the timeouts recorded");
    expect(w.endpoint(hook.webhookId)).toMatchObject({ state: "open", limit: 0 });
    const hung = r.receipts.length;
    expect(hung).toBeLessThanOrEqual(INITIAL_LIMIT); // (on a stalled machine a timeout can come before the request is out)

    // It answers again, the first answer (the probe's) after 150 ms.
    r.setFallback({ status: 200 }).enqueue({ status: 200, delayMs: 150 });
    await eventually(async () => (await world.db.prisma.delivery.count({ where: { webhookId: hook.webhookId, status: "succeeded" } })) === 30, 15_000, "all delivered");
    expect(w.endpoint(hook.webhookId).state).toBe("closed");
    expect(breakerMoves(hook.webhookId)).toEqual(["webhook.breaker.open", "webhook.breaker.half-open", "webhook.breaker.closed"]);

    // The probe went alone: the next request came only after its answer.
    const [probe, next] = r.receipts.slice(hung);
    expect(next.at - probe.at).toBeGreaterThanOrEqual(150);
    // Every attempt is logged: the timed-out ones as failures retried on the schedule, then the successes.
    const attempts = await attemptsOf(hook.webhookId);
    expect(attempts).toHaveLength(INITIAL_LIMIT + 30);
    expect(attempts.filter((a) => a.statusCode === null).map((a) => [a.attempt, a.error])).toEqual(
      Array.from({ length: INITIAL_LIMIT }, () => [1, `timeout: no response within ${TIMEOUT_MS} ms`]),
    );
    expect(attempts.filter((a) => a.statusCode === 200)).toHaveLength(30);
  });

  it("delivers a healthy webhook's backlog while three dead webhooks have theirs, which wait in the database", async () => {
    const healthy = await receiver({ status: 200 });
    const project = (await seedWebhook(world.db, masterKey, { url: healthy.url })).projectId;
    const dead = await Promise.all([0, 1, 2].map(() => receiver(HANG)));
    const deadHooks: SeededWebhook[] = [];
    for (const d of dead) deadHooks.push(await seedWebhook(world.db, masterKey, { url: d.url, projectId: project }));
    const healthyHook = (await world.db.prisma.webhook.findFirstOrThrow({ where: { projectId: project, url: healthy.url } })).id;
    // One business transaction per 50 events, each fanned out to all four webhooks.
    await enqueueEvents(world.db, project, 150, { perTx: 50 });

    // 16 slots: the three dead endpoints at the cap of 20 would take them all. Once open they
    // stay open for the rest of the test (no probe).
    const w = worker({ concurrency: 16, batchSize: 16, perWebhookCap: 20, breaker: { failures: 2, openMs: 60_000, maxOpenMs: 60_000 } });
    await healthy.waitFor(150, 20_000);
    await eventually(async () => deadHooks.every((h) => w.endpoint(h.webhookId).state === "open"), 10_000, "the dead endpoints' breakers to open");

    // Each dead endpoint got at most the concurrency of an unknown one, and nothing after that.
    for (const d of dead) expect(d.receipts.length).toBeLessThanOrEqual(INITIAL_LIMIT);
    // The healthy one earned more than that.
    expect(w.endpoint(healthyHook).limit).toBeGreaterThan(INITIAL_LIMIT);
    await eventually(async () => (await world.db.prisma.delivery.count({ where: { webhookId: healthyHook, status: "succeeded" } })) === 150, 10_000, "healthy recorded");

    // The dead backlogs are still there, pending; what was tried is logged and scheduled again.
    for (const h of deadHooks) {
      const rows = await world.db.prisma.delivery.findMany({ where: { webhookId: h.webhookId }, include: { attemptLog: true } });
      expect(rows.every((d) => d.status === "pending")).toBe(true);
      const tried = rows.filter((d) => d.attempts > 0);
      expect(tried.length).toBeLessThanOrEqual(INITIAL_LIMIT);
      for (const d of tried) {
        expect(d.attemptLog.map((a) => a.error)).toEqual([`timeout: no response within ${TIMEOUT_MS} ms`]);
        expect(d.nextAttemptAt.getTime()).toBeGreaterThanOrEqual(d.attemptLog[0].startedAt.getTime() + SCHEDULE[0] * 0.8);
      }
    }
  });
});
