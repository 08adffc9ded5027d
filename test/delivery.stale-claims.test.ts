// A claimed delivery can wait in the worker's queue for a send slot for up to a send's timeout.
// The claim copied its webhook's URL and secrets; a webhook deleted, disabled, moved or rotated
// while the delivery waited must not get it, or get it as the webhook is now (src/delivery/send-pool.ts,
// recheck; docs/webhooks.md, "Managing endpoints"). One send slot, the first delivery's request
// held at the receiver, the second claimed and queued behind it; the webhook changes; the first
// is answered and the second's slot frees.
import { afterEach, describe, expect, it } from "vitest";
import { seal } from "../src/crypto.ts";
import { secretRef } from "../src/delivery/sender.ts";
import type { DeliveryWorker } from "../src/delivery/worker.ts";
import { verifyWebhook } from "../src/webhooks/receiver.ts";
import { generateWebhookSecret } from "../src/webhooks/secrets.ts";
import { DELIVERY_CHANNEL } from "../src/webhooks/outbox.ts";
import { TRANSITION_MS } from "../src/webhooks/service.ts";
import { backends } from "./support/db.ts";
import { deliveryWorld } from "./support/delivery-world.ts";
import { enqueueEvents, eventually, newMasterKey, seedWebhook, type SeededWebhook, type TestReceiver } from "./support/receiver.ts";

const CONFIG = { retryScheduleMs: [60_000], webhookTimeoutMs: 10_000, webhookAllowPrivate: true };

describe.each(backends)("deliveries claimed before their webhook changed, on %s", (backend) => {
  const world = deliveryWorld(backend, {
    afterTest: async (db) => {
      await db.prisma.delivery.deleteMany();
      await db.prisma.outboxEvent.deleteMany();
    },
  });
  const masterKey = newMasterKey();
  // After hooks run last-registered first: the held request is answered before the world stops
  // its workers, which wait for their sends.
  let release: () => void = () => {};
  afterEach(() => release());

  type Queued = { r: TestReceiver; hook: SeededWebhook; w: DeliveryWorker; first: string; second: { id: string; eventId: string } };

  /** The first delivery sending (its request held until `release()`), the second claimed and waiting for the one slot. */
  async function oneQueued(recheckAfterMs = 0): Promise<Queued> {
    const held = new Promise<void>((resolve) => (release = resolve));
    const r = await world.receiver();
    r.enqueue({ status: 200, until: held });
    const hook = await seedWebhook(world.db, masterKey, { url: r.url });
    // recheckAfterMs 0: every queued delivery is checked, however short its wait (the default
    // only spares a drain at full speed the read)
    const w = world.worker({ masterKey, logger: world.logger, config: CONFIG, concurrency: 1, batchSize: 1, pollMs: 50, maintenanceIntervalMs: 0, recheckAfterMs });
    await enqueueEvents(world.db, hook.projectId, 2, { perTx: 2 });
    const [got] = await r.waitFor(1);
    await eventually(async () => w.stats.queued === 1, 10_000, "the second delivery to be claimed");
    expect(w.stats).toMatchObject({ claimed: 2, inFlight: 1, queued: 1 });
    const first = String(got.headers["x-service-event-id"]);
    const second = await world.db.prisma.delivery.findFirstOrThrow({ where: { webhookId: hook.webhookId, NOT: { eventId: first } } });
    return { r, hook, w, first, second };
  }

  /** What rotateWebhookSecret writes (src/webhooks/service.ts), twice: the claimed secret is dropped. Returns the two new secrets. */
  async function rotateTwice(hook: SeededWebhook): Promise<[string, string]> {
    const s1 = generateWebhookSecret();
    const s2 = generateWebhookSecret();
    for (const [now, before] of [[s1, hook.secret], [s2, s1]]) {
      await world.db.prisma.webhook.update({
        where: { id: hook.webhookId },
        data: { secretSealed: seal(masterKey, now), previousSecretSealed: seal(masterKey, before), previousSecretExpiresAt: new Date(Date.now() + TRANSITION_MS) },
      });
    }
    return [s1, s2];
  }

  /**
   * Both deliveries are done with: the first recorded, and nothing sending, queued (or being
   * checked) or waiting to be recorded, so the second was sent and recorded or handed back.
   */
  const settled = (w: DeliveryWorker) =>
    eventually(async () => w.stats.recorded >= 1 && w.stats.inFlight === 0 && w.stats.queued === 0 && w.stats.unrecorded === 0, 10_000, "the worker to settle both deliveries");

  it("a deleted webhook: the queued delivery is not sent (it went with its webhook)", async () => {
    const { r, hook, w, second } = await oneQueued();
    await world.db.prisma.webhook.delete({ where: { id: hook.webhookId } });
    release();
    await settled(w);
    expect(r.receipts).toHaveLength(1);
    expect(w.stats).toMatchObject({ recorded: 1, webhookReleased: 1, breakerReleased: 0 });
    expect(await world.db.prisma.delivery.findUnique({ where: { id: second.id } })).toBeNull();
  });

  it("a disabled webhook: the queued delivery is not sent, stays pending and unleased, and goes once the webhook is enabled again", async () => {
    const { r, hook, w, second } = await oneQueued();
    await world.db.prisma.webhook.update({ where: { id: hook.webhookId }, data: { enabled: false, disabledReason: "disabled by the project" } });
    release();
    await settled(w);
    expect(r.receipts).toHaveLength(1);
    expect(w.stats).toMatchObject({ recorded: 1, succeeded: 1, webhookReleased: 1, breakerReleased: 0 });
    // the hand-back's release is not awaited by the worker
    const row = () => world.db.prisma.delivery.findUniqueOrThrow({ where: { id: second.id }, include: { attemptLog: true } });
    const waiting = await eventually(async () => {
      const d = await row();
      return d.leasedBy === null && d;
    }, 10_000, "the lease to be released");
    expect(waiting).toMatchObject({ status: "pending", attempts: 0, leasedBy: null, leaseUntil: null, attemptLog: [] });

    await world.db.prisma.webhook.update({ where: { id: hook.webhookId }, data: { enabled: true, disabledReason: null } });
    w.wake();
    const [, again] = await r.waitFor(2);
    expect(again.headers["x-service-event-id"]).toBe(second.eventId);
    expect(again.headers["x-service-delivery-attempt"]).toBe("1");
  });

  it("a moved webhook: the queued delivery goes to the new URL, not the old one", async () => {
    const { r, hook, w, second } = await oneQueued();
    const moved = await world.receiver();
    await world.db.prisma.webhook.update({ where: { id: hook.webhookId }, data: { url: moved.url } });
    release();
    await settled(w);
    expect(r.receipts).toHaveLength(1);
    expect(moved.receipts.map((x) => x.headers["x-service-event-id"])).toEqual([second.eventId]);
    expect(w.stats).toMatchObject({ recorded: 2, succeeded: 2, webhookReleased: 0 });
    expect(await world.db.prisma.delivery.findUniqueOrThrow({ where: { id: second.id } })).toMatchObject({ status: "succeeded", attempts: 1 });
  });

  it("a webhook rotated twice: the queued delivery is signed with the secrets it has now, not the one dropped", async () => {
    const { r, hook, w, second } = await oneQueued();
    const [s1, s2] = await rotateTwice(hook);
    release();
    await settled(w);
    const [, got] = r.receipts;
    expect(got.headers["x-service-event-id"]).toBe(second.eventId);
    const headers = got.headers as Record<string, string>;
    expect(verifyWebhook(got.body, headers, s2).ok).toBe(true);
    expect(verifyWebhook(got.body, headers, s1).ok).toBe(true);
    expect(verifyWebhook(got.body, headers, hook.secret).ok).toBe(false);
    const d = await world.db.prisma.delivery.findUniqueOrThrow({ where: { id: second.id }, include: { attemptLog: true } });
    expect(d.attemptLog.map((a) => a.signedWith)).toEqual([`${secretRef(s2)} ${secretRef(s1)}`]);
  });

  // A delivery whose wait is too short to read its webhook again for that alone (recheckAfterMs:
  // a minute here, a quarter second by default) is read again once its worker has heard that the
  // webhook changed since the claim (src/webhooks/changes.sql NOTIFYs every change as it commits).
  describe("claimed the moment before the change", () => {
    const A_MINUTE = 60_000;
    /** The worker has heard of `n` changes: the change is known before the first send's slot frees. */
    const heard = (w: DeliveryWorker, n = 1) => eventually(async () => w.stats.webhookChanges >= n, 10_000, "the worker to hear of the change");

    it("a deleted webhook: the queued delivery is not sent", async () => {
      const { r, hook, w, second } = await oneQueued(A_MINUTE);
      await world.db.prisma.webhook.delete({ where: { id: hook.webhookId } });
      await heard(w);
      release();
      await settled(w);
      expect(r.receipts).toHaveLength(1);
      expect(w.stats).toMatchObject({ recorded: 1, webhookReleased: 1 });
      expect(await world.db.prisma.delivery.findUnique({ where: { id: second.id } })).toBeNull();
    });

    it("a disabled webhook: the queued delivery is not sent and stays pending", async () => {
      const { r, hook, w, second } = await oneQueued(A_MINUTE);
      await world.db.prisma.webhook.update({ where: { id: hook.webhookId }, data: { enabled: false, disabledReason: "disabled by the project" } });
      await heard(w);
      release();
      await settled(w);
      expect(r.receipts).toHaveLength(1);
      expect(w.stats).toMatchObject({ recorded: 1, webhookReleased: 1 });
      expect(await world.db.prisma.delivery.findUniqueOrThrow({ where: { id: second.id } })).toMatchObject({ status: "pending", attempts: 0 });
    });

    it("a moved webhook: the queued delivery goes to the new URL", async () => {
      const { r, hook, w, second } = await oneQueued(A_MINUTE);
      const moved = await world.receiver();
      await world.db.prisma.webhook.update({ where: { id: hook.webhookId }, data: { url: moved.url } });
      await heard(w);
      release();
      await settled(w);
      expect(r.receipts).toHaveLength(1);
      expect(moved.receipts.map((x) => x.headers["x-service-event-id"])).toEqual([second.eventId]);
    });

    it("a webhook rotated twice: the queued delivery is not signed with the secret dropped", async () => {
      const { r, hook, w } = await oneQueued(A_MINUTE);
      const [, s2] = await rotateTwice(hook);
      await heard(w, 2);
      release();
      await settled(w);
      const got = r.receipts[1];
      expect(verifyWebhook(got.body, got.headers as Record<string, string>, s2).ok).toBe(true);
      expect(verifyWebhook(got.body, got.headers as Record<string, string>, hook.secret).ok).toBe(false);
    });

    it("only a change that a delivery carries is told: a description or an event list is not", async () => {
      const hook = await seedWebhook(world.db, masterKey, { url: "http://127.0.0.1:9/" });
      const told: string[] = [];
      const unlisten = await world.db.listen(DELIVERY_CHANNEL, (payload) => told.push(payload));
      try {
        await world.db.prisma.webhook.update({ where: { id: hook.webhookId }, data: { description: "renamed", events: ["user.deleted"] } });
        await world.db.prisma.webhook.update({ where: { id: hook.webhookId }, data: { url: "http://127.0.0.1:9/moved" } });
        // notices arrive in commit order: once the second change's is in, the first's would be too
        await eventually(async () => told.length > 0, 10_000, "the notice of the new URL");
        expect(told).toEqual([`webhook:${hook.webhookId}`]);
      } finally {
        await unlisten();
      }
    });
  });
});
