// The delivery log services: redelivery, replay, pulling events, stats, dead-webhook disabling,
// and that every one of them keeps projects apart.
import pg from "pg";
import { describe, expect, it } from "vitest";
import { seal } from "../src/crypto.ts";
import { attemptRequestHeaders, SIGNATURE_NOT_SHOWN } from "../src/delivery/attempt-headers.ts";
import { disableDeadWebhooks } from "../src/delivery/dead-webhooks.ts";
import { pullEvents } from "../src/webhooks/events-pull.ts";
import { redeliver, replayFailed } from "../src/delivery/redelivery.ts";
import { deliveryChart, webhooksStats } from "../src/delivery/charts.ts";
import { claimDue, recordResults, releaseLeases } from "../src/delivery/sql.ts";
import type { DeliveryWorker, WorkerOptions } from "../src/delivery/worker.ts";
import { DeliveryNotFound, InvalidRequest, SecretKeyRequired, WebhookNotFound } from "../src/errors.ts";
import { newId } from "../src/ids.ts";
import { keyActor } from "./support/actors.ts";
import { backends } from "./support/db.ts";
import { deliveryWorld } from "./support/delivery-world.ts";
import { verifyWebhook } from "../src/webhooks/receiver.ts";
import { generateWebhookSecret } from "../src/webhooks/secrets.ts";
import { enqueueEvents, eventually, newMasterKey, seedWebhook } from "./support/receiver.ts";

const CONFIG = { retryScheduleMs: [20, 40], webhookTimeoutMs: 2_000, webhookAllowPrivate: true };
const HOUR = 3_600_000;

describe.each(backends)("delivery log on %s", (backend) => {
  const world = deliveryWorld(backend);
  const { receiver } = world;
  const masterKey = newMasterKey();

  function worker(opts: Partial<WorkerOptions> = {}): DeliveryWorker {
    return world.worker({ config: CONFIG, masterKey, pollMs: 100, maintenanceIntervalMs: 0, ...opts });
  }
  const deliveryOf = (eventId: string, webhookId: string) =>
    world.db.prisma.delivery.findUniqueOrThrow({ where: { eventId_webhookId: { eventId, webhookId } }, include: { attemptLog: true } });
  const statusIs = (webhookId: string, status: "succeeded" | "failed", n: number) =>
    eventually(async () => (await world.db.prisma.delivery.count({ where: { webhookId, status } })) === n, 10_000, `${n} ${status}`);

  describe("redeliver", () => {
    it("sends the same body bytes again as a fresh cycle (attempt 1), keeping the attempt log", async () => {
      const r = await receiver();
      const hook = await seedWebhook(world.db, masterKey, { url: r.url });
      worker();
      const [eventId] = await enqueueEvents(world.db, hook.projectId, 1);
      await statusIs(hook.webhookId, "succeeded", 1);
      const first = await deliveryOf(eventId, hook.webhookId);

      const s = await redeliver(world.db, await keyActor(world.db, hook.projectId), first.id);
      expect(s).toMatchObject({ id: first.id, eventId, status: "pending", attempts: 0, inFlight: false });
      const [a, b] = await r.waitFor(2);
      expect(b.body.equals(a.body)).toBe(true);
      expect(b.headers["x-service-event-id"]).toBe(eventId);
      expect(b.headers["x-service-delivery-attempt"]).toBe("1");
      const after = await eventually(async () => {
        const d = await deliveryOf(eventId, hook.webhookId);
        return d.status === "succeeded" && d.attemptLog.length === 2 ? d : null;
      });
      expect(after).toMatchObject({ attempts: 1, leasedBy: null });
    });

    it("leaves a delivery a worker holds alone", async () => {
      const hook = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/" });
      const [eventId] = await enqueueEvents(world.db, hook.projectId, 1);
      const [c] = await claimDue(world.db, { workerId: "other", limit: 10, leaseMs: 30_000, perWebhookCap: 10 });
      expect(c.eventId).toBe(eventId);
      const s = await redeliver(world.db, await keyActor(world.db, hook.projectId), c.deliveryId);
      expect(s).toMatchObject({ status: "pending", inFlight: true });
      expect((await deliveryOf(eventId, hook.webhookId)).leasedBy).toBe("other");
      await world.db.prisma.delivery.delete({ where: { id: c.deliveryId } });
    });

    it("does not find another project's delivery, nor an unknown one", async () => {
      const hook = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/", enabled: true });
      const [eventId] = await enqueueEvents(world.db, hook.projectId, 1);
      const d = await deliveryOf(eventId, hook.webhookId);
      await world.db.prisma.delivery.update({ where: { id: d.id }, data: { status: "failed", attempts: 6 } });
      const other = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/" });
      await expect(redeliver(world.db, await keyActor(world.db, other.projectId), d.id)).rejects.toBeInstanceOf(DeliveryNotFound);
      await expect(redeliver(world.db, await keyActor(world.db, hook.projectId), "dlv_nope")).rejects.toBeInstanceOf(DeliveryNotFound);
      expect(await deliveryOf(eventId, hook.webhookId)).toMatchObject({ status: "failed", attempts: 6 });
      await world.db.prisma.delivery.delete({ where: { id: d.id } });
    });
  });

  describe("a publishable key", () => {
    it("is refused by the delivery services and readers themselves, and changes nothing", async () => {
      const hook = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/", enabled: true });
      const [eventId] = await enqueueEvents(world.db, hook.projectId, 1);
      const d = await deliveryOf(eventId, hook.webhookId);
      await world.db.prisma.delivery.update({ where: { id: d.id }, data: { status: "failed", attempts: 6 } });
      const publishable = await keyActor(world.db, hook.projectId, "publishable");
      await expect(redeliver(world.db, publishable, d.id)).rejects.toBeInstanceOf(SecretKeyRequired);
      await expect(replayFailed(world.db, publishable, hook.webhookId, new Date(0))).rejects.toBeInstanceOf(SecretKeyRequired);
      await expect(pullEvents(world.db, publishable, { master: masterKey })).rejects.toBeInstanceOf(SecretKeyRequired);
      await expect(webhooksStats(world.db, publishable, [hook.webhookId])).rejects.toBeInstanceOf(SecretKeyRequired);
      await expect(deliveryChart(world.db, publishable, "day", hook.webhookId)).rejects.toBeInstanceOf(SecretKeyRequired);
      await expect(attemptRequestHeaders(world.db, masterKey, publishable, [])).rejects.toBeInstanceOf(SecretKeyRequired);
      expect(await deliveryOf(eventId, hook.webhookId)).toMatchObject({ status: "failed", attempts: 6 });
      await world.db.prisma.delivery.delete({ where: { id: d.id } });
    });
  });

  describe("replayFailed", () => {
    it("redelivers a webhook's failed deliveries created since a time, and only those", async () => {
      const r = await receiver({ status: 500 });
      const hook = await seedWebhook(world.db, masterKey, { url: r.url });
      const w = worker();
      const ids = await enqueueEvents(world.db, hook.projectId, 3, { perTx: 3 });
      await statusIs(hook.webhookId, "failed", 3);
      expect(r.receipts).toHaveLength(9); // 3 attempts each with a 2-step schedule
      await w.stop();
      // One of them is older than the replay window.
      const old = await deliveryOf(ids[0], hook.webhookId);
      await world.db.prisma.delivery.update({ where: { id: old.id }, data: { createdAt: new Date(Date.now() - 2 * HOUR) } });

      const other = await seedWebhook(world.db, masterKey, { url: r.url });
      const owner = await keyActor(world.db, hook.projectId);
      await expect(replayFailed(world.db, await keyActor(world.db, other.projectId), hook.webhookId, new Date(0))).rejects.toBeInstanceOf(WebhookNotFound);
      await expect(replayFailed(world.db, owner, "wh_nope", new Date(0))).rejects.toBeInstanceOf(WebhookNotFound);
      expect(await replayFailed(world.db, owner, hook.webhookId, new Date(Date.now() + HOUR))).toBe(0);

      r.setFallback({ status: 200 });
      expect(await replayFailed(world.db, owner, hook.webhookId, new Date(Date.now() - HOUR))).toBe(2);
      worker();
      await statusIs(hook.webhookId, "succeeded", 2);
      expect(r.receipts.slice(9).map((x) => x.headers["x-service-event-id"]).sort()).toEqual(ids.slice(1).sort());
      expect((await deliveryOf(ids[0], hook.webhookId)).status).toBe("failed");
      // Nothing left to replay in that window.
      expect(await replayFailed(world.db, owner, hook.webhookId, new Date(Date.now() - HOUR))).toBe(0);
    });
  });

  describe("pullEvents", () => {
    it("pages a project's events in order with opaque cursors; test events and other projects are left out", async () => {
      const a = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/", enabled: false });
      const b = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/", enabled: false });
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        ids.push(...(await enqueueEvents(world.db, a.projectId, 5, { perTx: 5 })));
        await enqueueEvents(world.db, b.projectId, 2, { perTx: 2 });
      }
      await enqueueEvents(world.db, a.projectId, 1, { test: { webhookId: a.webhookId } });

      const [asA, asB] = [await keyActor(world.db, a.projectId), await keyActor(world.db, b.projectId)];
      const pages = [];
      let after: string | null = null;
      for (;;) {
        const page = await pullEvents(world.db, asA, { master: masterKey, after, first: 10 });
        pages.push(page);
        after = page.endCursor;
        if (!page.hasMore) break;
      }
      expect(pages.map((p) => p.events.length)).toEqual([10, 10, 5]);
      expect(pages.flatMap((p) => p.events.map((e) => e.id))).toEqual(ids);
      const first = pages[0].events[0];
      const stored = await world.db.prisma.outboxEvent.findUniqueOrThrow({ where: { id: first.id } });
      expect(first).toMatchObject({ eventType: "user.created", body: stored.body });
      expect(JSON.parse(first.body)).toMatchObject({ id: first.id, project_id: a.projectId });
      expect(first.cursor).toMatch(/^[A-Za-z0-9_-]+$/);

      // Caught up: an empty page keeps the cursor; a new event appears after it.
      const empty = await pullEvents(world.db, asA, { master: masterKey, after, first: 10 });
      expect(empty).toEqual({ events: [], endCursor: after, hasMore: false });
      const [next] = await enqueueEvents(world.db, a.projectId, 1);
      expect((await pullEvents(world.db, asA, { master: masterKey, after })).events.map((e) => e.id)).toEqual([next]);

      // Another project sees only its own.
      expect((await pullEvents(world.db, asB, { master: masterKey, first: 100 })).events).toHaveLength(10);
      const quiet = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/", enabled: false });
      expect((await pullEvents(world.db, await keyActor(world.db, quiet.projectId), { master: masterKey })).events).toEqual([]);
      await expect(pullEvents(world.db, asA, { master: masterKey, after: "garbage" })).rejects.toBeInstanceOf(InvalidRequest);

      // A cursor says nothing of the one sequence all projects' events share: showing it let a
      // project count the others' events between two of its own (22nd review). Another project's
      // cursor is refused; one issued before cursors were sealed (v1:<seq>) still resumes.
      const seq = (await world.db.prisma.outboxEvent.findUniqueOrThrow({ where: { id: first.id } })).seq;
      const opened = Buffer.from(first.cursor, "base64url").toString("utf8");
      expect(opened).not.toMatch(/^v1:/);
      expect(opened).not.toContain(`:${seq}`);
      const bCursor = (await pullEvents(world.db, asB, { master: masterKey, first: 1 })).events[0]!.cursor;
      await expect(pullEvents(world.db, asA, { master: masterKey, after: bCursor })).rejects.toBeInstanceOf(InvalidRequest);
      const legacy = Buffer.from(`v1:${seq}`).toString("base64url");
      expect((await pullEvents(world.db, asA, { master: masterKey, after: legacy, first: 3 })).events.map((e) => e.id)).toEqual(ids.slice(1, 4));
      // but only one naming an event of the project, as every v1 cursor did: made-up ones let a
      // binary search find where the project's events sit in the shared sequence (31st review)
      const bEvent = (await pullEvents(world.db, asB, { master: masterKey, first: 1 })).events[0]!;
      const bSeq = (await world.db.prisma.outboxEvent.findUniqueOrThrow({ where: { id: bEvent.id } })).seq;
      for (const madeUp of [bSeq, 0n, 9_000_000_000n]) {
        await expect(pullEvents(world.db, asA, { master: masterKey, after: Buffer.from(`v1:${madeUp}`).toString("base64url") })).rejects.toBeInstanceOf(InvalidRequest);
      }
      for (const size of [0, 101, 1.5]) await expect(pullEvents(world.db, asA, { master: masterKey, first: size })).rejects.toBeInstanceOf(InvalidRequest);
    });

    it.runIf(backend === "postgres")("never pages past an event whose transaction is still open", async () => {
      const hook = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/", enabled: false });
      const owner = await keyActor(world.db, hook.projectId);
      const start = await pullEvents(world.db, owner, { master: masterKey });
      const open = new pg.Client({ connectionString: world.db.url });
      await open.connect();
      try {
        await open.query("BEGIN");
        await open.query(
          `INSERT INTO outbox_events (id, project_id, event_type, body) VALUES ($1, $2, 'user.created', '{}')`,
          ["evt_slow", hook.projectId],
        );
        await new Promise((r) => setTimeout(r, 1_100));
        const [later] = await enqueueEvents(world.db, hook.projectId, 1);
        // The later event is committed, but the open transaction holds a lower seq.
        const during = await pullEvents(world.db, owner, { master: masterKey, after: start.endCursor });
        expect(during.events).toEqual([]);
        await open.query("COMMIT");
        const after = await pullEvents(world.db, owner, { master: masterKey, after: start.endCursor });
        expect(after.events.map((e) => e.id)).toEqual(["evt_slow", later]);
      } finally {
        await open.end();
      }
    });

    it.runIf(backend === "postgres")("never pages past an open transaction's event for one committed by a transaction that began earlier but wrote later", async () => {
      const hook = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/", enabled: false });
      const owner = await keyActor(world.db, hook.projectId);
      const start = await pullEvents(world.db, owner, { master: masterKey });
      const [early, late] = [new pg.Client({ connectionString: world.db.url }), new pg.Client({ connectionString: world.db.url })];
      await early.connect();
      await late.connect();
      // what every business transaction writes its events with (src/webhooks/outbox.ts)
      const enqueueOn = (c: pg.Client, id: string) =>
        c.query(`SELECT outbox_enqueue('unused', ARRAY[$1], ARRAY[$2], ARRAY['user.created'], ARRAY['{}'], ARRAY[false], ARRAY[NULL::text])`, [id, hook.projectId]);
      try {
        // `early` begins (a sign-in waiting on a lock, say) well before `late`, but writes its event after it.
        await early.query("BEGIN");
        await early.query("SELECT now()");
        await new Promise((r) => setTimeout(r, 1_500));
        await late.query("BEGIN");
        await enqueueOn(late, "evt_late_begun");
        await enqueueOn(early, "evt_early_begun");
        await early.query("COMMIT");
        // A reader pulls while `late` is still open: the event it holds has the lower seq.
        const during = await pullEvents(world.db, owner, { master: masterKey, after: start.endCursor });
        expect(during.events).toEqual([]);
        await late.query("COMMIT");
        const next = await pullEvents(world.db, owner, { master: masterKey, after: during.endCursor });
        expect(next.events.map((e) => e.id)).toEqual(["evt_late_begun", "evt_early_begun"]);
      } finally {
        await early.end();
        await late.end();
      }
    });
  });

  describe("webhooksStats", () => {
    const webhookStats = async (projectId: string, webhookId: string) =>
      (await webhooksStats(world.db, await keyActor(world.db, projectId), [webhookId])).get(webhookId)!;

    it("reports the 24 h success rate and the last success, and nothing of another project's webhook", async () => {
      const r = await receiver();
      r.respond((x) => (JSON.parse(x.body.toString()).data.user.user_id === "acc_3" ? { status: 410 } : undefined));
      const hook = await seedWebhook(world.db, masterKey, { url: r.url });
      const before = await webhookStats(hook.projectId, hook.webhookId);
      expect(before).toMatchObject({ succeeded: 0, failed: 0, pending: 0, successRate: null, lastSuccessAt: null });
      worker();
      await enqueueEvents(world.db, hook.projectId, 4, { perTx: 4 });
      await statusIs(hook.webhookId, "succeeded", 3);
      await eventually(async () => (await world.db.prisma.delivery.count({ where: { webhookId: hook.webhookId, status: "gone" } })) === 1);
      const s = await webhookStats(hook.projectId, hook.webhookId);
      expect(s).toMatchObject({ windowHours: 24, succeeded: 3, failed: 0, gone: 1, pending: 0, successRate: 0.75 });
      expect(Date.now() - s.lastSuccessAt!.getTime()).toBeLessThan(60_000);
      const other = await seedWebhook(world.db, masterKey, { url: r.url });
      expect(await webhookStats(other.projectId, hook.webhookId)).toMatchObject({ succeeded: 0, gone: 0, successRate: null, lastSuccessAt: null });
    });
  });

  describe("attemptRequestHeaders", () => {
    /** The headers as the receiver got them, under the names the sender used. */
    const asSent = (got: Record<string, unknown>, names: string[]) => Object.fromEntries(names.map((n) => [n, got[n.toLowerCase()]]));

    it("rebuilds the headers each attempt sent, during and after a rotation, from what the attempt stored", async () => {
      const r = await receiver({ status: 500 });
      const old = generateWebhookSecret();
      const hook = await seedWebhook(world.db, masterKey, { url: r.url, previous: { secret: old, expiresAt: new Date(Date.now() + HOUR) } });
      worker();
      const [eventId] = await enqueueEvents(world.db, hook.projectId, 1);
      await statusIs(hook.webhookId, "failed", 1);
      const d = await world.db.prisma.delivery.findUniqueOrThrow({
        where: { eventId_webhookId: { eventId, webhookId: hook.webhookId } },
        include: { attemptLog: { orderBy: { attempt: "asc" } } },
      });
      const ids = d.attemptLog.map((a) => a.id);
      const owner = await keyActor(world.db, hook.projectId);
      const shown = await attemptRequestHeaders(world.db, masterKey, owner, ids);
      expect(r.receipts).toHaveLength(3);
      for (const [i, got] of r.receipts.entries()) {
        const h = shown.get(ids[i])!;
        expect(Object.keys(h)).toContain("X-Service-Signature-Previous");
        expect(h).toEqual(asSent(got.headers, Object.keys(h)));
        expect(verifyWebhook(got.body, h, old).ok && verifyWebhook(got.body, h, hook.secret).ok).toBe(true);
      }

      // Another project's caller finds nothing; unknown ids are left out.
      const other = await seedWebhook(world.db, masterKey, { url: r.url });
      expect((await attemptRequestHeaders(world.db, masterKey, await keyActor(world.db, other.projectId), ids)).size).toBe(0);
      expect([...(await attemptRequestHeaders(world.db, masterKey, owner, [ids[0], "att_nope"])).keys()]).toEqual([ids[0]]);

      // Rotated twice since: the secrets that signed are gone, so are their signatures; the rest stays.
      await world.db.prisma.webhook.update({
        where: { id: hook.webhookId },
        data: { secretSealed: seal(masterKey, generateWebhookSecret()), previousSecretSealed: seal(masterKey, hook.secret) },
      });
      const later = (await attemptRequestHeaders(world.db, masterKey, owner, [ids[0]])).get(ids[0])!;
      const before = shown.get(ids[0])!;
      expect(later).toEqual({
        ...before,
        "X-Service-Signature-Previous": SIGNATURE_NOT_SHOWN,
        "webhook-signature": `${before["webhook-signature"].split(" ")[0]} ${SIGNATURE_NOT_SHOWN}`,
      });
    });

    it("shows the headers stored by attempts logged before signed_with, and none for an attempt that sent nothing", async () => {
      const hook = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/", enabled: false });
      const [eventId] = await enqueueEvents(world.db, hook.projectId, 1);
      const deliveryId = (await world.db.prisma.delivery.create({ data: { id: newId("dlv"), eventId, webhookId: hook.webhookId, projectId: hook.projectId, eventType: "user.created" } })).id;
      const stored = { "X-Service-Event-Id": eventId, "X-Service-Delivery-Attempt": "1" };
      const legacy = await world.db.prisma.deliveryAttempt.create({ data: { id: newId("att"), deliveryId, attempt: 1, startedAt: new Date(), durationMs: 3, requestHeaders: stored } });
      const refused = await world.db.prisma.deliveryAttempt.create({ data: { id: newId("att"), deliveryId, attempt: 2, startedAt: new Date(), durationMs: 0, error: "target refused" } });
      const shown = await attemptRequestHeaders(world.db, masterKey, await keyActor(world.db, hook.projectId), [legacy.id, refused.id]);
      expect(shown.get(legacy.id)).toEqual(stored);
      expect(shown.get(refused.id)).toEqual({});
    });
  });

  describe("disableDeadWebhooks", () => {
    // Attempt history is written directly: 24 hours cannot pass in a test.
    async function history(webhookId: string, projectId: string, attempts: [hoursAgo: number, status: number | null][], now: Date, createdHoursAgo = 30) {
      const eventId = newId("evt");
      await world.db.prisma.outboxEvent.create({ data: { id: eventId, projectId, eventType: "user.deleted", body: "{}" } });
      const deliveryId = newId("dlv");
      await world.db.prisma.delivery.create({
        data: { id: deliveryId, eventId, webhookId, projectId, eventType: "user.deleted", status: "failed", createdAt: new Date(now.getTime() - createdHoursAgo * HOUR), attempts: attempts.length },
      });
      let n = 0;
      for (const [hoursAgo, statusCode] of attempts) {
        await world.db.prisma.deliveryAttempt.create({
          data: { id: newId("att"), deliveryId, attempt: ++n, startedAt: new Date(now.getTime() - hoursAgo * HOUR), durationMs: 5, statusCode, requestHeaders: {} },
        });
      }
    }

    it("disables a webhook whose attempts have all failed for 24 hours, with a reason, and only that one", async () => {
      const now = new Date();
      const dead = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/", events: ["user.deleted"] });
      await history(dead.webhookId, dead.projectId, [[26, 500], [12, null], [1, 503]], now);
      // Failing for only 20 hours (a success 21 hours ago).
      const flaky = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/", events: ["user.deleted"] });
      await history(flaky.webhookId, flaky.projectId, [[26, 500], [21, 200], [20, 500], [1, 500]], now);
      // Failed long ago, quiet since: not judged on old failures alone.
      const quiet = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/", events: ["user.deleted"] });
      await history(quiet.webhookId, quiet.projectId, [[30, 500], [28, 500]], now);
      // Healthy.
      const fine = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/", events: ["user.deleted"] });
      await history(fine.webhookId, fine.projectId, [[26, 500], [2, 200]], now);
      // A pending delivery of the dead webhook is abandoned (replayable later).
      const [pendingEvent] = await enqueueEvents(world.db, dead.projectId, 1, { eventType: "user.deleted" });

      const disabled = await disableDeadWebhooks(world.db, now);
      expect(disabled.map((d) => d.webhookId)).toEqual([dead.webhookId]);
      expect(disabled[0]).toMatchObject({ projectId: dead.projectId });
      expect(disabled[0].failingSince.getTime()).toBe(now.getTime() - 26 * HOUR);
      const row = await world.db.prisma.webhook.findUniqueOrThrow({ where: { id: dead.webhookId } });
      expect(row.enabled).toBe(false);
      expect(row.disabledReason).toMatch(/^every delivery attempt failed for 24 hours \(failing since \d{4}-\d\d-\d\dT/);
      for (const h of [flaky, quiet, fine]) expect((await world.db.prisma.webhook.findUniqueOrThrow({ where: { id: h.webhookId } })).enabled).toBe(true);
      expect(await deliveryOf(pendingEvent, dead.webhookId)).toMatchObject({ status: "failed", lastError: expect.stringMatching(/^webhook disabled/) });

      // Idempotent.
      expect(await disableDeadWebhooks(world.db, now)).toEqual([]);
    });

    it("fails the pending deliveries a worker holds at that moment too: given back unsent or recorded as a retry, none stays pending", async () => {
      const now = new Date();
      const dead = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/", events: ["user.deleted"] });
      await history(dead.webhookId, dead.projectId, [[26, 500], [1, 503]], now);
      const [unsent, retried] = await enqueueEvents(world.db, dead.projectId, 2, { eventType: "user.deleted" });
      const claimed = await claimDue(world.db, { workerId: "w1", limit: 10, leaseMs: 30_000, perWebhookCap: 10 });
      const held = (eventId: string) => claimed.find((c) => c.eventId === eventId)!;
      expect(claimed).toHaveLength(2);

      expect((await disableDeadWebhooks(world.db, now)).map((d) => d.webhookId)).toEqual([dead.webhookId]);
      // the worker gives one back unsent (its breaker opened, it stops, or the webhook is off) …
      await releaseLeases(world.db, "w1", [held(unsent).deliveryId]);
      // … and records the other's attempt, which failed, as a retry
      const attemptId = newId("att");
      await recordResults(world.db, "w1", [
        { deliveryId: held(retried).deliveryId, attemptId, attempt: 1, status: "pending", delayMs: 10_000, statusCode: 503, error: null, startedAt: new Date(), durationMs: 5, responseExcerpt: null, signedWith: [] },
      ]);

      for (const eventId of [unsent, retried]) {
        expect(await deliveryOf(eventId, dead.webhookId)).toMatchObject({ status: "failed", lastError: expect.stringMatching(/^webhook disabled/), leasedBy: null });
      }
      // the attempt that was on its way is in the log all the same
      expect((await deliveryOf(retried, dead.webhookId)).attemptLog.map((a) => [a.id, a.statusCode])).toEqual([[attemptId, 503]]);
    });

    // 32nd review: a success of a delivery created before the 3 days judged was not seen
    it("a success on an older delivery (redelivered, replayed) ends the run of failures as any success does", async () => {
      const now = new Date();
      const taking = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/", events: ["user.deleted"] });
      await history(taking.webhookId, taking.projectId, [[30, 500], [10, 500], [0.2, 500]], now);
      await history(taking.webhookId, taking.projectId, [[96, 500], [1, 200]], now, 96);
      // the older delivery went through before this run of failures began: failing since 27 hours
      const failing = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/", events: ["user.deleted"] });
      await history(failing.webhookId, failing.projectId, [[40, 500], [27, 500], [1, 500]], now);
      await history(failing.webhookId, failing.projectId, [[96, 500], [28, 200]], now, 96);

      const disabled = await disableDeadWebhooks(world.db, now);
      expect(disabled.map((d) => d.webhookId)).toEqual([failing.webhookId]);
      expect(disabled[0].failingSince.getTime()).toBe(now.getTime() - 27 * HOUR);
      expect((await world.db.prisma.webhook.findUniqueOrThrow({ where: { id: taking.webhookId } })).enabled).toBe(true);
    });

    it("runs from the worker and logs a webhook.disabled notice", async () => {
      const now = new Date();
      const dead = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/", events: ["user.deleted"] });
      await history(dead.webhookId, dead.projectId, [[25, 500], [1, 500]], now);
      const notices: object[] = [];
      const logger = { debug() {}, info() {}, error() {}, warn: (obj: object, msg?: string) => msg === "webhook.disabled" && notices.push(obj) };
      const w = worker({ maintenanceIntervalMs: 50, logger });
      await eventually(async () => w.stats.webhooksDisabled === 1);
      expect(notices).toEqual([expect.objectContaining({ event: "webhook.disabled", webhookId: dead.webhookId, projectId: dead.projectId })]);
    });
  });
});
