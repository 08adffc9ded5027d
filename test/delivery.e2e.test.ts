// Every event type, produced by the real API, reaches a subscribed receiver on loopback signed
// as docs/webhooks.md says; the delivery log, redelivery, replay and pull work over GraphQL.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWorker, type DeliveryWorker } from "../src/delivery/worker.ts";
import { verifyWebhook } from "../src/webhooks/receiver.ts";
import { EVENT_TYPES } from "../src/webhooks/event-types.ts";
import {
  CreateWebhookDocument,
  EventsDocument,
  type EventsQuery,
  RedeliverDocument,
  ReplayFailedDocument,
  RotateWebhookSecretDocument,
  SendTestWebhookDocument,
  WebhookDeliveriesDocument,
} from "./generated/operations.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { TestReceiver, eventually } from "./support/receiver.ts";

describe.each(backends)("delivery end to end on %s", (backend) => {
  let h: Harness;
  let worker: DeliveryWorker;
  let receiver: TestReceiver;
  let webhookId: string;
  let secret: string;

  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_WEBHOOK_RETRY_SCHEDULE_MS: "50,50,50,50,50" } });
    receiver = await TestReceiver.start();
    const created = await h.op(CreateWebhookDocument, { input: { url: receiver.url, events: [...EVENT_TYPES], description: "all" } });
    if (created.createWebhook.__typename !== "CreateWebhookPayload") throw new Error(created.createWebhook.__typename);
    webhookId = created.createWebhook.webhook.id;
    secret = created.createWebhook.secret;
    worker = startWorker({ db: h.db, config: h.config, masterKey: h.app.deps.master, pollMs: 50 });
  });
  afterAll(async () => {
    await worker?.stop();
    await receiver?.close();
    await h?.close();
  });

  const received = () => receiver.receipts.map((r) => JSON.parse(r.body.toString("utf8")) as { event_type: string; id: string });

  it("the account lifecycle's events arrive signed, with the exact bytes of the outbox", async () => {
    const a = await h.signIn({ email: `ada-${backend}@example.com` });
    const b = await h.signIn({ email: `bob-${backend}@example.com` });
    const auth = { authorization: `Bearer ${a.token}` };
    const link = async (body: object) => {
      const r = await h.call("POST", "/users/link/request", { body, headers: auth });
      const to = "email" in body ? (body as { email: string }).email : (body as { phone: string }).phone;
      return h.call("POST", "/users/link/verify", { body: { state_id: r.body.state_id, otp: await h.mailbox.otp(to) }, headers: auth });
    };
    expect((await link({ phone: "+12025550177" })).body.outcome).toBe("attached");
    expect((await link({ email: `bob-${backend}@example.com` })).body.outcome).toBe("merged");
    expect((await h.call("POST", "/users/link/unmerge", { body: {}, headers: auth })).status).toBe(200);
    expect((await h.call("POST", "/users/link/remove", { body: { phone: "+12025550177" }, headers: auth })).status).toBe(200);
    await h.gql(`mutation { updateProfile(name: "Ada") { __typename } }`, {}, auth);
    await h.gql(`mutation { deleteAccount { __typename } }`, {}, { authorization: `Bearer ${b.token}` });

    const expected = ["user.created", "user.authentication.success", "user.identifier.linked", "user.merged", "user.unmerged", "user.identifier.unlinked", "user.updated"];
    const events = await h.db.prisma.outboxEvent.findMany({ where: { projectId: h.projectId } });
    await receiver.waitFor(events.length, 15_000);
    const types = new Set(received().map((e) => e.event_type));
    for (const t of expected) expect(types, t).toContain(t);

    for (const r of receiver.receipts) {
      const v = verifyWebhook(r.body, r.headers as Record<string, string>, secret);
      expect(v.ok).toBe(true);
      const stored = events.find((e) => e.id === r.headers["x-service-event-id"]);
      expect(r.body.toString("utf8")).toBe(stored?.body);
      expect(r.headers["content-type"]).toBe("application/json");
      expect(r.headers["x-service-event-type"]).toBe(stored?.eventType);
      expect(r.headers["webhook-id"]).toBe(stored?.id);
      expect(r.headers["x-service-delivery-attempt"]).toBe("1");
    }
  });

  it("every event type can be sent as a test event and arrives marked test: true", async () => {
    const before = receiver.receipts.length;
    for (const t of EVENT_TYPES) {
      const r = await h.op(SendTestWebhookDocument, { webhookId, eventType: t });
      expect(r.sendTestWebhook.__typename).toBe("SendTestWebhookPayload");
    }
    await receiver.waitFor(before + EVENT_TYPES.length, 15_000);
    const tests = received().slice(before) as Array<{ event_type: string; test?: boolean }>;
    expect(new Set(tests.map((e) => e.event_type))).toEqual(new Set(EVENT_TYPES));
    expect(tests.every((e) => e.test === true)).toBe(true);
  });

  it("during a rotation a receiver holding either secret verifies the delivery", async () => {
    const rotated = await h.op(RotateWebhookSecretDocument, { webhookId });
    if (rotated.rotateWebhookSecret.__typename !== "RotateWebhookSecretPayload") throw new Error();
    const before = receiver.receipts.length;
    await h.op(SendTestWebhookDocument, { webhookId, eventType: "user.updated" });
    const [r] = (await receiver.waitFor(before + 1)).slice(before);
    expect(verifyWebhook(r.body, r.headers as Record<string, string>, secret).ok).toBe(true);
    expect(verifyWebhook(r.body, r.headers as Record<string, string>, rotated.rotateWebhookSecret.newSecret).ok).toBe(true);
    expect(String(r.headers["webhook-signature"]).split(" ")).toHaveLength(2);
    secret = rotated.rotateWebhookSecret.newSecret;
  });

  it("the delivery log shows every attempt; a failed delivery is redelivered and replayed", async () => {
    receiver.setFallback({ status: 500, body: "receiver is down" });
    const sent = await h.op(SendTestWebhookDocument, { webhookId, eventType: "user.deleted" });
    if (sent.sendTestWebhook.__typename !== "SendTestWebhookPayload") throw new Error();
    const eventId = sent.sendTestWebhook.eventId;
    const failed = await eventually(async () => {
      const log = await h.op(WebhookDeliveriesDocument, { id: webhookId, status: "failed" });
      return log.webhook?.deliveries.edges.map((e) => e.node).find((d) => d.eventId === eventId);
    }, 15_000, "the delivery to fail");
    expect(failed.attempts).toBe(6);
    expect(failed.attemptLog.map((a) => a.attempt)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(failed.attemptLog[0]).toMatchObject({ statusCode: 500, responseExcerpt: "receiver is down" });
    // The headers shown are the ones the receiver got, signatures included (rebuilt from what the attempt stored).
    const shown = failed.attemptLog[0].requestHeaders as Record<string, string>;
    const got = receiver.receipts.find((r) => r.headers["x-service-event-id"] === eventId && r.headers["x-service-delivery-attempt"] === "1")!;
    expect(shown["X-Service-Event-Id"]).toBe(eventId);
    for (const name of ["X-Service-Signature", "X-Service-Signature-Previous", "webhook-timestamp", "webhook-signature"]) expect(shown[name], name).toBe(got.headers[name.toLowerCase()]);

    receiver.setFallback({ status: 200 });
    const again = await h.op(RedeliverDocument, { deliveryId: failed.id });
    expect(again.redeliverWebhookDelivery.__typename).toBe("Delivery");
    await eventually(async () => (await h.db.prisma.delivery.findUnique({ where: { id: failed.id } }))?.status === "succeeded", 10_000, "redelivery");
    // the log shows the latest schedule's worth of attempts unless asked for more, and says how many it holds
    const attemptsOf = async (selection: string) =>
      (await h.gql(`query($e: ID!, $w: ID!) { event(id: $e) { deliveries(webhookId: $w) { attemptCount ${selection} } } }`, { e: eventId, w: webhookId })).body.data.event.deliveries[0];
    const latest = await attemptsOf("attemptLog { attempt statusCode }");
    expect(latest.attemptCount).toBe(7);
    expect(latest.attemptLog.map((a: { attempt: number }) => a.attempt)).toEqual([2, 3, 4, 5, 6, 1]);
    expect(latest.attemptLog.at(-1).statusCode).toBe(200);
    expect((await attemptsOf("attemptLog(last: 7) { attempt }")).attemptLog.map((a: { attempt: number }) => a.attempt)).toEqual([1, 2, 3, 4, 5, 6, 1]);

    receiver.setFallback({ status: 500 });
    const second = await h.op(SendTestWebhookDocument, { webhookId, eventType: "user.created" });
    if (second.sendTestWebhook.__typename !== "SendTestWebhookPayload") throw new Error();
    const secondId = second.sendTestWebhook.eventId;
    await eventually(async () => (await h.db.prisma.delivery.findFirst({ where: { eventId: secondId } }))?.status === "failed", 15_000, "second failure");
    receiver.setFallback({ status: 200 });
    const replay = await h.op(ReplayFailedDocument, { webhookId, since: new Date(Date.now() - 60_000).toISOString() });
    expect(replay.replayFailedWebhookDeliveries).toMatchObject({ __typename: "ReplayFailedDeliveriesPayload", count: 1 });
    await eventually(async () => (await h.db.prisma.delivery.findFirst({ where: { eventId: secondId } }))?.status === "succeeded", 10_000, "replay");

    const log = await h.op(WebhookDeliveriesDocument, { id: webhookId, eventType: "user.created" });
    expect(log.webhook?.deliveries.edges.length).toBeGreaterThan(0);
    expect(log.webhook?.deliveries.edges.every((e) => e.node.eventType === "user.created")).toBe(true);
    expect(log.webhook?.stats.succeeded).toBeGreaterThan(0);
    expect(log.webhook?.stats.lastSuccessAt).not.toBeNull();
  });

  it("a receiver that was down catches up by pulling events after a cursor", async () => {
    const all: string[] = [];
    let after: string | null | undefined = null;
    for (let page = 0; page < 50; page++) {
      const r: EventsQuery = await h.op(EventsDocument, { after, first: 3 });
      if (r.events.__typename !== "EventPage") throw new Error(r.events.message);
      all.push(...r.events.events.map((e: { id: string }) => e.id));
      after = r.events.endCursor;
      if (!r.events.hasMore) break;
    }
    const real = await h.db.prisma.outboxEvent.findMany({ where: { projectId: h.projectId, test: false }, orderBy: { seq: "asc" } });
    expect(all).toEqual(real.map((e) => e.id));
  });
});
