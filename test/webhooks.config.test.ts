import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CreateWebhookDocument,
  DeleteWebhookDocument,
  RotateWebhookSecretDocument,
  SendTestWebhookDocument,
  UpdateWebhookDocument,
  WebhookDocument,
  WebhooksDocument,
} from "./generated/operations.ts";
import { disableDeadWebhooks } from "../src/delivery/dead-webhooks.ts";
import { newId } from "../src/ids.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { unseal } from "../src/crypto.ts";
import { authenticateProject } from "../src/auth/authenticate.ts";
import { SecretKeyRequired, WebhookNotFound } from "../src/errors.ts";
import {
  createWebhook,
  deleteWebhook,
  findWebhook,
  rotateWebhookSecret,
  sendTestWebhook,
  TRANSITION_MS,
  updateWebhook,
} from "../src/webhooks/service.ts";

describe.each(backends)("webhook configuration on %s", (backend) => {
  let h: Harness;
  let otherKey: string;
  beforeAll(async () => {
    h = await startHarness(backend);
    const other = await h.gql(`mutation { createProject(name: "other") { ... on CreateProjectPayload { apiKey } } }`, {}, { "x-admin-token": h.adminToken });
    otherKey = other.body.data.createProject.apiKey;
  });
  afterAll(() => h?.close());

  const create = (url = "https://127.0.0.1:9/hook", events = ["user.created"]) =>
    h.op(CreateWebhookDocument, { input: { url, events, description: "test" } });
  /** The caller a transport hands the services, authenticated by the key as any request is. */
  const actorOf = (apiKey: string) => authenticateProject(h.app.deps, { apiKey, clientAddress: "127.0.0.1" });

  it("createWebhook returns the webhook and its secret once; the secret is stored encrypted", async () => {
    const r = await create();
    if (r.createWebhook.__typename !== "CreateWebhookPayload") throw new Error(r.createWebhook.__typename);
    expect(r.createWebhook.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const row = await h.db.prisma.webhook.findUniqueOrThrow({ where: { id: r.createWebhook.webhook.id } });
    expect(row.secretSealed).not.toContain(r.createWebhook.secret);
    expect(unseal(h.app.deps.master, row.secretSealed)).toBe(r.createWebhook.secret);
    const listed = await h.op(WebhooksDocument, {});
    expect(listed.webhooks.edges.map((e) => e.node.id)).toContain(r.createWebhook.webhook.id);
    expect(listed.eventTypes).toContain("user.merged");
  });

  it("auth.login.success is stored as its canonical user.authentication.success", async () => {
    const r = await create(undefined, ["auth.login.success"]);
    expect(r.createWebhook.__typename === "CreateWebhookPayload" && r.createWebhook.webhook.events).toEqual(["user.authentication.success"]);
  });

  it("unknown event types and unsafe URLs are typed errors", async () => {
    expect((await create(undefined, ["user.exploded"])).createWebhook.__typename).toBe("InvalidEventType");
    expect((await create("ftp://example.com/x")).createWebhook.__typename).toBe("InvalidWebhookUrl");
    // within 2048 characters as written, six times that percent-encoded as it is sent (fourteenth review)
    const long = await create(`https://127.0.0.1:9/${"é".repeat(2000)}`);
    expect(long.createWebhook).toMatchObject({ __typename: "InvalidWebhookUrl", message: expect.stringMatching(/at most 2048 characters, percent-encoded/) });
    expect((await create(`https://127.0.0.1:9/${"e".repeat(2000)}`)).createWebhook.__typename).toBe("CreateWebhookPayload");
    // an unknown event type is not echoed whole
    const odd = await create(undefined, ["x".repeat(5000)]);
    expect(odd.createWebhook.__typename === "InvalidEventType" && odd.createWebhook.message.length).toBeLessThan(200);
    // cut between characters: an emoji at the cut is echoed whole, never half of it (an unpaired surrogate)
    const emoji = await create(undefined, [`${"x".repeat(99)}😀${"x".repeat(10)}`]);
    expect(emoji.createWebhook).toMatchObject({ __typename: "InvalidEventType", message: `unknown event type: ${"x".repeat(99)}😀` });
    // a URL is counted in characters as written: 1,500 emoji are within 2048, but not percent-encoded
    const emojiUrl = await create(`https://127.0.0.1:9/${"😀".repeat(1500)}`);
    expect(emojiUrl.createWebhook).toMatchObject({ __typename: "InvalidWebhookUrl", message: expect.stringMatching(/at most 2048 characters, percent-encoded/) });
  });

  it("a webhook is rotated over REST with the API key as bearer; the old secret stays for 7 days", async () => {
    const r = await create();
    if (r.createWebhook.__typename !== "CreateWebhookPayload") throw new Error();
    const before = Date.now();
    const rest = await h.call("POST", "/api/v1/webhooks/rotate-secret", {
      body: { webhook_id: r.createWebhook.webhook.id },
      headers: { authorization: `Bearer ${h.apiKey}`, "x-api-key": "" },
    });
    expect(rest.status).toBe(200);
    expect(rest.body).toMatchObject({ success: true, webhook_id: r.createWebhook.webhook.id });
    expect(rest.body.new_secret).toMatch(/^whsec_/);
    const ends = Date.parse(rest.body.transition_ends_at);
    expect(ends - before).toBeGreaterThanOrEqual(TRANSITION_MS - 1000);
    expect(ends - before).toBeLessThanOrEqual(TRANSITION_MS + 60_000);
    const row = await h.db.prisma.webhook.findUniqueOrThrow({ where: { id: r.createWebhook.webhook.id } });
    expect(unseal(h.app.deps.master, row.previousSecretSealed!)).toBe(r.createWebhook.secret);

    const gql = await h.op(RotateWebhookSecretDocument, { webhookId: r.createWebhook.webhook.id });
    if (gql.rotateWebhookSecret.__typename !== "RotateWebhookSecretPayload") throw new Error();
    expect(gql.rotateWebhookSecret.success).toBe(true);
    const after = await h.db.prisma.webhook.findUniqueOrThrow({ where: { id: r.createWebhook.webhook.id } });
    // rotating during a transition drops the oldest secret
    expect(unseal(h.app.deps.master, after.previousSecretSealed!)).toBe(rest.body.new_secret);
    expect(unseal(h.app.deps.master, after.secretSealed)).toBe(gql.rotateWebhookSecret.newSecret);
  });

  it("a user's access token in Authorization beside the key in X-API-Key rotates with the key", async () => {
    const r = await create();
    if (r.createWebhook.__typename !== "CreateWebhookPayload") throw new Error();
    const user = await h.signIn({ email: "rotator@example.com" });
    const rest = await h.call("POST", "/api/v1/webhooks/rotate-secret", {
      body: { webhook_id: r.createWebhook.webhook.id },
      headers: { authorization: `Bearer ${user.token}`, "x-api-key": h.apiKey },
    });
    expect(rest.status).toBe(200);
    expect(rest.body.new_secret).toMatch(/^whsec_/);
    // a token alone is no key
    const alone = await h.call("POST", "/api/v1/webhooks/rotate-secret", {
      body: { webhook_id: r.createWebhook.webhook.id },
      headers: { authorization: `Bearer ${user.token}`, "x-api-key": "" },
    });
    expect(alone.status).toBe(401);
  });

  it("the transition ends 7 days after the rotation, by the database's clock", async () => {
    const r = await create();
    if (r.createWebhook.__typename !== "CreateWebhookPayload") throw new Error();
    const id = r.createWebhook.webhook.id;
    const rotated = await rotateWebhookSecret(h.app.deps, await actorOf(h.apiKey), id);
    const [{ now }] = await h.db.prisma.$queryRaw<{ now: Date }[]>`SELECT now() AS now`;
    expect(rotated.transitionEndsAt.getTime()).toBeLessThanOrEqual(now.getTime() + TRANSITION_MS);
    expect(rotated.transitionEndsAt.getTime()).toBeGreaterThan(now.getTime() + TRANSITION_MS - 60_000);
    expect((await h.op(WebhookDocument, { id })).webhook?.transitionEndsAt).toBe(rotated.transitionEndsAt.toISOString());
    // 7 days later, by the database, the webhook is out of its transition
    await h.db.prisma.$executeRaw`UPDATE webhooks SET previous_secret_expires_at = previous_secret_expires_at - make_interval(secs => ${TRANSITION_MS / 1000 + 1}::int) WHERE id = ${id}`;
    expect((await h.op(WebhookDocument, { id })).webhook?.transitionEndsAt).toBeNull();
  });

  it("another project's webhook is simply not found", async () => {
    const r = await create();
    if (r.createWebhook.__typename !== "CreateWebhookPayload") throw new Error();
    const id = r.createWebhook.webhook.id;
    const asOther = { "x-api-key": otherKey };
    const rest = await h.call("POST", "/api/v1/webhooks/rotate-secret", { body: { webhook_id: id }, headers: { authorization: `Bearer ${otherKey}` } });
    expect(rest.status).toBe(404);
    expect(rest.body.error).toBe("WebhookNotFound");
    expect((await h.op(WebhookDocument, { id }, asOther)).webhook).toBeNull();
    expect((await h.op(RotateWebhookSecretDocument, { webhookId: id }, asOther)).rotateWebhookSecret.__typename).toBe("WebhookNotFound");
    expect((await h.op(UpdateWebhookDocument, { id, input: { description: "x" } }, asOther)).updateWebhook.__typename).toBe("WebhookNotFound");
    expect((await h.op(DeleteWebhookDocument, { id }, asOther)).deleteWebhook.__typename).toBe("WebhookNotFound");
    expect((await h.op(SendTestWebhookDocument, { webhookId: id, eventType: "user.created" }, asOther)).sendTestWebhook.__typename).toBe("WebhookNotFound");
    expect((await h.op(WebhooksDocument, {}, asOther)).webhooks.edges.map((e) => e.node.id)).not.toContain(id);
  });

  it("the services themselves refuse a publishable key, whichever transport called, and change nothing", async () => {
    const publishable = await actorOf(h.publishableKey);
    const { webhook } = await createWebhook(h.app.deps, await actorOf(h.apiKey), { url: "https://127.0.0.1:9/hook", events: ["user.created"] });
    const webhooksBefore = await h.db.prisma.webhook.count();
    const refusals = [
      () => createWebhook(h.app.deps, publishable, { url: "https://127.0.0.1:9/hook", events: ["user.created"] }),
      () => findWebhook(h.app.deps, publishable, webhook.id),
      () => updateWebhook(h.app.deps, publishable, webhook.id, { enabled: false }),
      () => deleteWebhook(h.app.deps, publishable, webhook.id),
      () => rotateWebhookSecret(h.app.deps, publishable, webhook.id),
      () => sendTestWebhook(h.app.deps, publishable, webhook.id, "user.created"),
    ];
    for (const call of refusals) await expect(call()).rejects.toBeInstanceOf(SecretKeyRequired);
    expect(await h.db.prisma.webhook.count()).toBe(webhooksBefore);
    expect(await h.db.prisma.webhook.findUniqueOrThrow({ where: { id: webhook.id } })).toEqual(webhook);
    expect(await h.db.prisma.delivery.count({ where: { webhookId: webhook.id } })).toBe(0);
  });

  it("the services do not find another project's webhook, even for its secret key", async () => {
    const { webhook } = await createWebhook(h.app.deps, await actorOf(h.apiKey), { url: "https://127.0.0.1:9/hook", events: ["user.created"] });
    const other = await actorOf(otherKey);
    const misses = [
      () => findWebhook(h.app.deps, other, webhook.id),
      () => updateWebhook(h.app.deps, other, webhook.id, { enabled: false }),
      () => deleteWebhook(h.app.deps, other, webhook.id),
      () => rotateWebhookSecret(h.app.deps, other, webhook.id),
      () => sendTestWebhook(h.app.deps, other, webhook.id, "user.created"),
    ];
    for (const call of misses) await expect(call()).rejects.toBeInstanceOf(WebhookNotFound);
    expect(await h.db.prisma.webhook.findUniqueOrThrow({ where: { id: webhook.id } })).toEqual(webhook);
    expect(await h.db.prisma.delivery.count({ where: { webhookId: webhook.id } })).toBe(0);
  });

  it("update disables with a reason and re-enables; delete removes", async () => {
    const r = await create();
    if (r.createWebhook.__typename !== "CreateWebhookPayload") throw new Error();
    const id = r.createWebhook.webhook.id;
    const off = await h.op(UpdateWebhookDocument, { id, input: { enabled: false } });
    expect(off.updateWebhook.__typename === "UpdateWebhookPayload" && off.updateWebhook.webhook).toMatchObject({ enabled: false, disabledReason: "disabled by the project" });
    const on = await h.op(UpdateWebhookDocument, { id, input: { enabled: true, events: ["user.updated", "user.deleted"] } });
    expect(on.updateWebhook.__typename === "UpdateWebhookPayload" && on.updateWebhook.webhook).toMatchObject({ enabled: true, disabledReason: null, events: ["user.updated", "user.deleted"] });
    expect((await h.op(DeleteWebhookDocument, { id })).deleteWebhook.__typename).toBe("DeleteWebhookPayload");
    expect((await h.op(WebhookDocument, { id })).webhook).toBeNull();
  });

  // 30th review: judged on the failures that disabled it, a webhook enabled again was disabled
  // again at the next check, a minute later, unless a delivery happened to succeed first
  it("a webhook the engine disabled, enabled again or moved, is judged only on what happened since", async () => {
    const HOUR = 3_600_000;
    const failedFor = async (id: string, hoursAgo: number[]) => {
      const eventId = newId("evt");
      await h.db.prisma.outboxEvent.create({ data: { id: eventId, projectId: h.projectId, eventType: "user.created", body: "{}" } });
      const deliveryId = newId("dlv");
      await h.db.prisma.delivery.create({
        data: { id: deliveryId, eventId, webhookId: id, projectId: h.projectId, eventType: "user.created", status: "failed", createdAt: new Date(Date.now() - 30 * HOUR), attempts: hoursAgo.length },
      });
      for (const [i, ago] of hoursAgo.entries()) {
        await h.db.prisma.deliveryAttempt.create({ data: { id: newId("att"), deliveryId, attempt: i + 1, startedAt: new Date(Date.now() - ago * HOUR), durationMs: 5, statusCode: 500 } });
      }
    };
    const webhook = (id: string) => h.db.prisma.webhook.findUniqueOrThrow({ where: { id } });
    for (const change of [{ enabled: true }, { url: "https://127.0.0.1:9/fixed" }] as const) {
      const r = await create();
      if (r.createWebhook.__typename !== "CreateWebhookPayload") throw new Error();
      const id = r.createWebhook.webhook.id;
      await failedFor(id, [26, 12, 1]);
      expect((await disableDeadWebhooks(h.db)).map((d) => d.webhookId)).toContain(id);
      expect(await webhook(id)).toMatchObject({ enabled: false, disabledReason: expect.stringMatching(/^every delivery attempt failed/) });

      // the project fixes its endpoint (or points it elsewhere) and enables it again
      const on = await h.op(UpdateWebhookDocument, { id, input: { ...change, enabled: true } });
      expect(on.updateWebhook.__typename).toBe("UpdateWebhookPayload");
      expect((await disableDeadWebhooks(h.db, new Date(Date.now() + 60_000))).map((d) => d.webhookId)).not.toContain(id);
      expect(await webhook(id)).toMatchObject({ enabled: true, disabledReason: null });
      // nor a day later, with no attempt since: the old failures no longer count
      expect((await disableDeadWebhooks(h.db, new Date(Date.now() + 26 * HOUR))).map((d) => d.webhookId)).toEqual([]);
    }
  });

  it("sendTestWebhook queues a test event for that webhook alone", async () => {
    const a = await create(undefined, ["user.merged"]);
    const b = await create(undefined, ["user.merged"]);
    if (a.createWebhook.__typename !== "CreateWebhookPayload" || b.createWebhook.__typename !== "CreateWebhookPayload") throw new Error();
    const sent = await h.op(SendTestWebhookDocument, { webhookId: a.createWebhook.webhook.id, eventType: "user.merged" });
    if (sent.sendTestWebhook.__typename !== "SendTestWebhookPayload") throw new Error();
    const deliveries = await h.db.prisma.delivery.findMany({ where: { eventId: sent.sendTestWebhook.eventId } });
    expect(deliveries.map((d) => d.webhookId)).toEqual([a.createWebhook.webhook.id]);
    const event = await h.db.prisma.outboxEvent.findUniqueOrThrow({ where: { id: sent.sendTestWebhook.eventId } });
    const envelope = JSON.parse(event.body);
    expect(envelope).toMatchObject({ id: event.id, event_type: "user.merged", project_id: h.projectId, test: true });
    expect(envelope.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/);
  });

  it("real events carry no test flag and fan out only to subscribed, enabled webhooks", async () => {
    const sub = await create(undefined, ["user.created"]);
    const unsub = await create(undefined, ["user.deleted"]);
    if (sub.createWebhook.__typename !== "CreateWebhookPayload" || unsub.createWebhook.__typename !== "CreateWebhookPayload") throw new Error();
    await h.signIn({ email: `fan-${backend}@example.com` });
    const event = await h.db.prisma.outboxEvent.findFirstOrThrow({ where: { eventType: "user.created" }, orderBy: { seq: "desc" } });
    expect(JSON.parse(event.body).test).toBeUndefined();
    const targets = (await h.db.prisma.delivery.findMany({ where: { eventId: event.id } })).map((d) => d.webhookId);
    expect(targets).toContain(sub.createWebhook.webhook.id);
    expect(targets).not.toContain(unsub.createWebhook.webhook.id);
  });
});
