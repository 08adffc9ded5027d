// The claim/lease/record statements on their own, without HTTP.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { applyStaged, claimDue, recordResults, releaseLeases, renewLeases, type ClaimedDelivery, type DeliveryResult } from "../src/delivery/sql.ts";
import { SUCCESS_STATUSES } from "../src/delivery/schedule.ts";
import { newId } from "../src/ids.ts";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";
import { enqueueEvents, newMasterKey, seedWebhook } from "./support/receiver.ts";

const masterKey = newMasterKey();
const URL_ = "http://127.0.0.1:9/hook";

function result(c: ClaimedDelivery, over: Partial<DeliveryResult> = {}): DeliveryResult {
  return {
    deliveryId: c.deliveryId,
    attemptId: newId("att"),
    attempt: c.attempt,
    status: "succeeded",
    delayMs: null,
    statusCode: 200,
    error: null,
    startedAt: new Date(),
    durationMs: 12,
    responseExcerpt: "ok",
    signedWith: ["0123456789abcdef"],
    ...over,
  };
}

describe.each(backends)("delivery SQL on %s", (backend) => {
  let db: TestDatabase;
  const claim = (workerId: string, limit = 100, perWebhookCap = 100, leaseMs = 30_000) => claimDue(db, { workerId, limit, leaseMs, perWebhookCap });

  beforeAll(async () => {
    db = await openTestDatabase(backend);
  });
  afterAll(async () => {
    await db?.close();
  });
  beforeEach(async () => {
    // Each test starts from an empty queue.
    await db.prisma.delivery.deleteMany();
  });

  it("counts as delivered in SQL (delivery_ok) exactly the statuses the worker does (SUCCESS_STATUSES)", async () => {
    const rows = await db.prisma.$queryRaw<{ code: number | null; ok: boolean }[]>`
      SELECT code, delivery_ok(code) AS ok FROM (SELECT generate_series(100, 599) AS code UNION ALL SELECT NULL) c`;
    expect(rows).toHaveLength(501);
    for (const r of rows) expect(r.ok, String(r.code)).toBe(r.code !== null && SUCCESS_STATUSES.has(r.code));
  });

  it("claims due deliveries with everything the sender needs, and only once", async () => {
    const hook = await seedWebhook(db, masterKey, { url: URL_ });
    const [eventId] = await enqueueEvents(db, hook.projectId, 1);
    const [c] = await claim("w1");
    const event = await db.prisma.outboxEvent.findUniqueOrThrow({ where: { id: eventId } });
    expect(c).toMatchObject({
      attempt: 1,
      projectId: hook.projectId,
      webhookId: hook.webhookId,
      eventId,
      eventType: "user.created",
      body: event.body,
      url: URL_,
      previousSecretSealed: null,
      previousSecretExpiresAt: null,
    });
    expect(c.secretSealed).toMatch(/^v1\./);
    expect(c.eventCreatedMs).toBe(event.createdAt.getTime());
    const row = await db.prisma.delivery.findUniqueOrThrow({ where: { id: c.deliveryId } });
    expect(row.leasedBy).toBe("w1");
    expect(row.leaseUntil!.getTime()).toBeGreaterThan(Date.now() + 25_000);
    // The lease is all a claim changes: the delivery keeps its due time (and its place in line).
    expect(row.nextAttemptAt.getTime()).toBeLessThanOrEqual(Date.now());
    expect(await claim("w2")).toEqual([]);
  });

  it("caps each webhook's leases and takes the oldest of every webhook first", async () => {
    const busy = await seedWebhook(db, masterKey, { url: URL_ });
    const quiet = await seedWebhook(db, masterKey, { url: URL_ });
    await enqueueEvents(db, busy.projectId, 30, { perTx: 30 });
    await enqueueEvents(db, quiet.projectId, 2, { perTx: 2 });

    // Fairness: a batch smaller than the backlog still reaches the quiet webhook.
    const first = await claim("w1", 4, 5);
    expect(first.filter((c) => c.webhookId === quiet.webhookId)).toHaveLength(2);
    expect(first.filter((c) => c.webhookId === busy.webhookId)).toHaveLength(2);

    // The cap counts leases already held, by anyone.
    const second = await claim("w2", 100, 5);
    expect(second.map((c) => c.webhookId)).toEqual([busy.webhookId, busy.webhookId, busy.webhookId]);
    expect(await claim("w3", 100, 5)).toEqual([]);

    // Recording frees room.
    await recordResults(db, "w1", first.filter((c) => c.webhookId === busy.webhookId).map((c) => result(c)));
    expect(await claim("w3", 100, 5)).toHaveLength(2);
  });

  // fifteenth review: taking turns by webhook only, a project with 20 webhooks whose receivers
  // answered in half the timeout held every send slot, and another project's webhook got one
  // delivery a second. Sixteenth: the load is the worker's, since webhooks with no room left
  // are not read, and their leases were not counted.
  it("takes turns by project, after the deliveries the worker holds for each: many webhooks of one project get no more turns than one webhook of another", async () => {
    const many = await seedWebhook(db, masterKey, { url: URL_ });
    const others = [];
    for (let i = 0; i < 3; i++) others.push(await seedWebhook(db, masterKey, { url: URL_, projectId: many.projectId }));
    await enqueueEvents(db, many.projectId, 5, { perTx: 5 }); // older: 5 for each of its 4 webhooks
    const one = await seedWebhook(db, masterKey, { url: URL_ });
    await enqueueEvents(db, one.projectId, 5, { perTx: 5 });
    const projectOf = (c: ClaimedDelivery) => (c.projectId === one.projectId ? "one" : "many");
    const claimWith = async (limit: number, held: { many?: number; one?: number }, rooms?: { webhookIds: string[]; rooms: number[] }) =>
      (
        await claimDue(db, {
          workerId: "w1",
          limit,
          leaseMs: 30_000,
          perWebhookCap: 100,
          endpointRooms: rooms && { ...rooms, otherwise: 100 },
          projectLoads: { projectIds: [many.projectId, one.projectId], loads: [held.many ?? 0, held.one ?? 0] },
        })
      ).map(projectOf);

    // holding nothing, each project's first turn, then its second: the older backlog does not go first for all of it
    expect(await claimWith(4, {})).toEqual(["many", "one", "many", "one"]);
    // the worker holds 2 of "many" and none of "one": "one"'s turns come first
    expect(await claimWith(3, { many: 2 })).toEqual(["one", "one", "many"]);
    // "many"'s webhooks this worker has no room for are not read, but what it holds of them counts
    const full = { webhookIds: [many.webhookId, ...others.slice(0, 2).map((o) => o.webhookId)], rooms: [0, 0, 0] };
    expect(await claimWith(2, { many: 40, one: 2 }, full)).toEqual(["one", "many"]);
    // with no other project waiting, one project takes every free slot
    expect(await claimWith(100, { many: 40, one: 3 })).toEqual(Array(20 - 4).fill("many"));
  });

  it("does not claim deliveries of a disabled webhook", async () => {
    const hook = await seedWebhook(db, masterKey, { url: URL_ });
    await enqueueEvents(db, hook.projectId, 2, { perTx: 2 });
    await db.prisma.webhook.update({ where: { id: hook.webhookId }, data: { enabled: false } });
    expect(await claim("w1")).toEqual([]);
    await db.prisma.webhook.update({ where: { id: hook.webhookId }, data: { enabled: true } });
    expect(await claim("w1")).toHaveLength(2);
  });

  it("records a retry: not due until its delay passes, then attempt 2", async () => {
    const hook = await seedWebhook(db, masterKey, { url: URL_ });
    await enqueueEvents(db, hook.projectId, 1);
    const [c] = await claim("w1");
    const before = Date.now();
    const applied = await recordResults(db, "w1", [result(c, { status: "pending", delayMs: 60_000, statusCode: 500, error: "HTTP 500" })]);
    const after = Date.now();
    expect(applied).toEqual([c.deliveryId]);
    const row = await db.prisma.delivery.findUniqueOrThrow({ where: { id: c.deliveryId }, include: { attemptLog: true } });
    expect(row).toMatchObject({ status: "pending", attempts: 1, leasedBy: null, leaseUntil: null, lastStatus: 500, lastError: "HTTP 500", completedAt: null });
    // Due one delay after the result was recorded (database and test share this machine's clock).
    expect(row.nextAttemptAt.getTime()).toBeGreaterThanOrEqual(before + 60_000 - 1_000);
    expect(row.nextAttemptAt.getTime()).toBeLessThanOrEqual(after + 60_000 + 1_000);
    expect(row.attemptLog).toHaveLength(1);
    expect(row.attemptLog[0]).toMatchObject({ attempt: 1, statusCode: 500, durationMs: 12, responseExcerpt: "ok", signedWith: "0123456789abcdef", requestHeaders: null });
    expect(await claim("w1")).toEqual([]);
    // The delay passes: moved in the database rather than waited for, so a slow machine can't
    // make the "not due yet" claim above see it due.
    await db.prisma.$executeRaw`UPDATE deliveries SET next_attempt_at = now() - interval '1 second' WHERE id = ${c.deliveryId}`;
    const [again] = await claim("w2");
    expect(again).toMatchObject({ deliveryId: c.deliveryId, attempt: 2 });
  });

  it("a lost lease: the late worker's result is logged but not applied", async () => {
    const hook = await seedWebhook(db, masterKey, { url: URL_ });
    await enqueueEvents(db, hook.projectId, 1);
    const [late] = await claim("w1", 10, 10, 1);
    await new Promise((r) => setTimeout(r, 20));
    expect(await renewLeases(db, "w1", [late.deliveryId], 30_000)).toEqual([late.deliveryId]); // nobody took it yet
    await db.prisma.$executeRaw`UPDATE deliveries SET lease_until = now() - interval '1 second', next_attempt_at = now() - interval '1 second'`;
    const [taken] = await claim("w2");
    expect(taken).toMatchObject({ deliveryId: late.deliveryId, attempt: 1 });
    expect(await renewLeases(db, "w1", [late.deliveryId], 30_000)).toEqual([]);

    expect(await recordResults(db, "w2", [result(taken)])).toEqual([taken.deliveryId]);
    expect(await recordResults(db, "w1", [result(late, { status: "pending", delayMs: 10, statusCode: 500 })])).toEqual([]);
    const row = await db.prisma.delivery.findUniqueOrThrow({ where: { id: late.deliveryId }, include: { attemptLog: true } });
    expect(row).toMatchObject({ status: "succeeded", attempts: 1, lastStatus: 200 });
    expect(row.attemptLog.map((a) => a.statusCode).sort()).toEqual([200, 500]);
    // Applying the same result twice is impossible too.
    expect(await recordResults(db, "w2", [result(taken)])).toEqual([]);

    // The dashboard's rollups count each logged attempt once, applied or not (the record
    // statement stages them itself, and the triggers must not count them again), and the
    // delivery once.
    await applyStaged(db, true);
    const [hours] = await db.prisma.$queryRaw<{ succeeded: number; retried: number; failed: number }[]>`
      SELECT sum(succeeded)::int AS succeeded, sum(retried)::int AS retried, sum(failed)::int AS failed
      FROM dashboard.webhook_hours WHERE webhook_id = ${hook.webhookId}`;
    const [logged] = await db.prisma.$queryRaw<{ ok: number; not_ok: number }[]>`
      SELECT count(*) FILTER (WHERE a.status_code = 200)::int AS ok, count(*) FILTER (WHERE a.status_code <> 200)::int AS not_ok
      FROM delivery_attempts a WHERE a.delivery_id = ${late.deliveryId}`;
    expect(hours).toEqual({ succeeded: logged.ok, retried: logged.not_ok, failed: 0 });
    const [states] = await db.prisma.$queryRaw<{ succeeded: number; failed: number }[]>`
      SELECT sum(succeeded)::int AS succeeded, sum(failed)::int AS failed FROM dashboard.webhook_delivery_hours WHERE webhook_id = ${hook.webhookId}`;
    expect(states).toEqual({ succeeded: 1, failed: 0 });
  });

  it("a batch whose every lease was lost still counts its logged attempts in the dashboard's rollups", async () => {
    const hook = await seedWebhook(db, masterKey, { url: URL_ });
    await enqueueEvents(db, hook.projectId, 2);
    const late = await claim("w1");
    await db.prisma.$executeRaw`UPDATE deliveries SET leased_by = 'someone else'`;
    expect(await recordResults(db, "w1", late.map((c) => result(c, { status: "failed", statusCode: 500 })))).toEqual([]);
    await applyStaged(db, true);
    const [hours] = await db.prisma.$queryRaw<{ succeeded: number; retried: number; failed: number }[]>`
      SELECT sum(succeeded)::int AS succeeded, sum(retried)::int AS retried, sum(failed)::int AS failed
      FROM dashboard.webhook_hours WHERE webhook_id = ${hook.webhookId}`;
    // Logged, not applied: the deliveries are still pending, so these attempts were retried.
    expect(hours).toEqual({ succeeded: 0, retried: 2, failed: 0 });
  });

  it("a record stages the dashboard's numbers of its batch, and an apply adds them; attempts logged by other statements are counted by the triggers at once", async () => {
    await applyStaged(db, true); // what earlier tests staged
    const hook = await seedWebhook(db, masterKey, { url: URL_ });
    await enqueueEvents(db, hook.projectId, 3);
    const claimed = await claim("w1");
    const numbers = async () => {
      const [row] = await db.prisma.$queryRaw<{ ok: number; retried: number; failed: number; state_ok: number; state_failed: number; staged: number }[]>`
        SELECT (SELECT coalesce(sum(succeeded), 0)::int FROM dashboard.webhook_hours WHERE webhook_id = ${hook.webhookId}) AS ok,
               (SELECT coalesce(sum(retried), 0)::int FROM dashboard.webhook_hours WHERE webhook_id = ${hook.webhookId}) AS retried,
               (SELECT coalesce(sum(failed), 0)::int FROM dashboard.webhook_hours WHERE webhook_id = ${hook.webhookId}) AS failed,
               (SELECT coalesce(sum(succeeded), 0)::int FROM dashboard.webhook_delivery_hours WHERE webhook_id = ${hook.webhookId}) AS state_ok,
               (SELECT coalesce(sum(failed), 0)::int FROM dashboard.webhook_delivery_hours WHERE webhook_id = ${hook.webhookId}) AS state_failed,
               (SELECT count(*)::int FROM dashboard.staged_outcomes) AS staged`;
      return row;
    };
    await recordResults(db, "w1", [
      result(claimed[0]),
      result(claimed[1], { status: "pending", delayMs: 60_000, statusCode: 500 }),
      result(claimed[2], { status: "failed", statusCode: 500 }),
    ]);
    expect(await numbers()).toEqual({ ok: 0, retried: 0, failed: 0, state_ok: 0, state_failed: 0, staged: 1 });
    expect(await applyStaged(db, false)).toBe(1);
    expect(await numbers()).toEqual({ ok: 1, retried: 1, failed: 1, state_ok: 1, state_failed: 1, staged: 0 });
    expect(await applyStaged(db, true)).toBe(0);

    // The previous build's worker (during a rolling upgrade) logs attempts and updates
    // deliveries without staging: the triggers count those as they happen.
    await db.prisma.$executeRaw`
      WITH u AS (UPDATE deliveries SET status = 'succeeded', attempts = 2, completed_at = now() WHERE id = ${claimed[1].deliveryId} RETURNING id)
      INSERT INTO delivery_attempts (id, delivery_id, attempt, started_at, duration_ms, status_code)
      SELECT ${newId("att")}, id, 2, now(), 5, 200 FROM u`;
    expect(await numbers()).toEqual({ ok: 2, retried: 1, failed: 1, state_ok: 2, state_failed: 1, staged: 0 });
  });

  it("an apply drops the staged outcomes of a webhook deleted meanwhile, and adds the others", async () => {
    const gone = await seedWebhook(db, masterKey, { url: URL_ });
    const kept = await seedWebhook(db, masterKey, { url: URL_ });
    await enqueueEvents(db, gone.projectId, 1);
    await enqueueEvents(db, kept.projectId, 1);
    const claimed = await claim("w1");
    expect(claimed).toHaveLength(2);
    await applyStaged(db, true); // what earlier tests staged
    await recordResults(db, "w1", claimed.map((c) => result(c)));
    await db.prisma.webhook.delete({ where: { id: gone.webhookId } });
    expect(await applyStaged(db, true)).toBe(1);
    const rows = await db.prisma.$queryRaw<{ webhook_id: string; succeeded: number }[]>`
      SELECT webhook_id, succeeded FROM dashboard.webhook_hours WHERE webhook_id IN (${gone.webhookId}, ${kept.webhookId})`;
    expect(rows).toEqual([{ webhook_id: kept.webhookId, succeeded: 1 }]);
  });

  it("an apply after a webhook's deletion still adds its staged attempts to the project's chart", async () => {
    // The project's chart counts every webhook's attempts, deleted ones included (docs/graphql.md,
    // deliveryChart): attempts recorded in the second before the deletion are no exception.
    const hook = await seedWebhook(db, masterKey, { url: URL_ });
    await enqueueEvents(db, hook.projectId, 2);
    const claimed = await claim("w1");
    expect(claimed).toHaveLength(2);
    await applyStaged(db, true); // what earlier tests staged
    await recordResults(db, "w1", [result(claimed[0]), result(claimed[1], { status: "pending", delayMs: 60_000, statusCode: 500 })]);
    await db.prisma.webhook.delete({ where: { id: hook.webhookId } });
    expect(await applyStaged(db, true)).toBe(1);
    const [project] = await db.prisma.$queryRaw<{ succeeded: number; retried: number }[]>`
      SELECT coalesce(sum(succeeded), 0)::int AS succeeded, coalesce(sum(retried), 0)::int AS retried
      FROM dashboard.project_hours WHERE project_id = ${hook.projectId}`;
    expect(project).toEqual({ succeeded: 1, retried: 1 });
    const [hours] = await db.prisma.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM dashboard.webhook_hours WHERE webhook_id = ${hook.webhookId}`;
    expect(hours.n).toBe(0);
  });

  it("a lease that runs out puts its delivery first in line again, with the same attempt number", async () => {
    const hook = await seedWebhook(db, masterKey, { url: URL_ });
    const ids = await enqueueEvents(db, hook.projectId, 6, { perTx: 1 });
    const crashed = await claim("w1", 2, 10); // the two oldest, then w1 dies
    expect(crashed.map((c) => c.eventId)).toEqual(ids.slice(0, 2));
    const alive = await claim("w2", 2, 10);
    expect(alive.map((c) => c.eventId)).toEqual(ids.slice(2, 4));
    // w1's leases run out: moved in the database rather than waited for (a 50 ms lease ran out
    // before w2's claim on a loaded machine, which then took w1's deliveries itself).
    await db.prisma.$executeRaw`UPDATE deliveries SET lease_until = now() - interval '1 second' WHERE leased_by = 'w1'`;
    const next = await claim("w3", 3, 10);
    expect(next.map((c) => [c.eventId, c.attempt])).toEqual([[ids[0], 1], [ids[1], 1], [ids[4], 1]]);
  });

  it("counts live leases at the head of a webhook's queue against its cap", async () => {
    const hook = await seedWebhook(db, masterKey, { url: URL_ });
    const ids = await enqueueEvents(db, hook.projectId, 10, { perTx: 1 });
    const first = await claim("w1", 3, 4);
    expect(first).toHaveLength(3);
    expect(await claim("w2", 3, 4)).toHaveLength(1);
    expect(await claim("w3", 3, 4)).toEqual([]);
    // A result frees its room, whether the delivery is done or retried later.
    await recordResults(db, "w1", [result(first[0], { status: "pending", delayMs: 60_000, statusCode: 503 })]);
    const next = await claim("w3", 3, 4);
    expect(next.map((c) => c.eventId)).toEqual([ids[4]]);
  });

  it("release makes a worker's unsent claims due for everyone at once", async () => {
    const hook = await seedWebhook(db, masterKey, { url: URL_ });
    await enqueueEvents(db, hook.projectId, 3, { perTx: 3 });
    const mine = await claim("w1");
    expect(mine).toHaveLength(3);
    expect(await releaseLeases(db, "w1", [mine[0].deliveryId])).toBe(1);
    const [again] = await claim("w2");
    expect(again.deliveryId).toBe(mine[0].deliveryId);
    // Only the worker's own leases: w2 now holds the first one.
    expect(await releaseLeases(db, "w1", mine.map((c) => c.deliveryId))).toBe(2);
    expect(await claim("w2")).toHaveLength(2);
  });

  it("stores text Postgres would refuse (NUL) and many results in one statement", async () => {
    const hook = await seedWebhook(db, masterKey, { url: URL_ });
    await enqueueEvents(db, hook.projectId, 120, { perTx: 120 });
    const claimed = await claim("w1", 200, 200);
    expect(claimed).toHaveLength(120);
    const applied = await recordResults(
      db,
      "w1",
      claimed.map((c, i) => result(c, i % 2 ? { status: "failed", statusCode: 500, responseExcerpt: "bad\u0000bytes", error: "HTTP 500" } : {})),
    );
    expect(applied).toHaveLength(120);
    expect(await db.prisma.delivery.count({ where: { webhookId: hook.webhookId, status: "failed" } })).toBe(60);
    const withNul = await db.prisma.deliveryAttempt.findFirstOrThrow({ where: { delivery: { webhookId: hook.webhookId }, statusCode: 500 } });
    expect(withNul.responseExcerpt).toBe("bad\uFFFDbytes");
  });
});
