// A project's secret key cannot fill the tables and the shared delivery queue with test events
// (docs/security.md, "Abuse limits"): each sendTestWebhook is an event and a delivery, kept and
// retried like real ones, and nothing bounded them. A project sends at most 100 in 10 minutes,
// to all its webhooks together; another project's budget is its own.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProject } from "../src/auth/projects.ts";
import { TEST_EVENTS_PER_PROJECT } from "../src/webhooks/service.ts";
import { CreateWebhookDocument, SendTestWebhookDocument } from "./generated/operations.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

describe.each(backends)("test events on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  async function webhookOf(headers?: Record<string, string>): Promise<string> {
    const r = await h.op(CreateWebhookDocument, { input: { url: "https://127.0.0.1:9/hook", events: ["user.created"] } }, headers);
    if (r.createWebhook.__typename !== "CreateWebhookPayload") throw new Error(r.createWebhook.__typename);
    return r.createWebhook.webhook.id;
  }

  /** One request of `count` aliased sendTestWebhook mutations, run in order. */
  async function sendTests(webhookId: string, count: number, eventType = "user.created") {
    const fields = Array.from({ length: count }, (_, i) => `t${i}: sendTestWebhook(webhookId: $id, eventType: $type) { __typename ... on RateLimited { retryAfterSeconds } }`);
    const res = await h.gql(`mutation($id: ID!, $type: String!) { ${fields.join(" ")} }`, { id: webhookId, type: eventType });
    expect(res.body.errors).toBeUndefined();
    return fields.map((_, i) => res.body.data[`t${i}`]);
  }

  const testEvents = (projectId: string) => h.db.prisma.outboxEvent.count({ where: { projectId, test: true } });

  it("takes 100 test events in 10 minutes per project, over all its webhooks, then answers RateLimited and queues nothing", async () => {
    expect(TEST_EVENTS_PER_PROJECT).toEqual({ max: 100, windowSeconds: 600 });
    const [first, second] = [await webhookOf(), await webhookOf()];
    const sent = [];
    for (let i = 0; i < 4; i++) sent.push(...(await sendTests(i % 2 ? second : first, 25)));
    expect(sent.map((r) => r.__typename)).toEqual(Array(100).fill("SendTestWebhookPayload"));
    expect(await testEvents(h.projectId)).toBe(100);

    const refused = await h.op(SendTestWebhookDocument, { webhookId: second, eventType: "user.deleted" });
    expect(refused.sendTestWebhook).toMatchObject({ __typename: "RateLimited" });
    const [limited] = await sendTests(first, 1);
    expect(limited).toEqual({ __typename: "RateLimited", retryAfterSeconds: expect.any(Number) });
    expect(limited.retryAfterSeconds).toBeGreaterThan(0);
    // the budget back once the first of them leaves the sliding window: a window and a quarter at most (docs/security.md)
    expect(limited.retryAfterSeconds).toBeLessThanOrEqual(750);
    expect(await testEvents(h.projectId)).toBe(100);

    // bad input is still told apart: the budget is counted only for a request that would queue an event
    const unknownType = await h.op(SendTestWebhookDocument, { webhookId: first, eventType: "user.nonsense" });
    expect(unknownType.sendTestWebhook.__typename).toBe("InvalidEventType");
    // and not echoed whole, as createWebhook does not (a body may be 64 KiB)
    const long = await h.op(SendTestWebhookDocument, { webhookId: first, eventType: "x".repeat(5000) });
    expect(long.sendTestWebhook.__typename === "InvalidEventType" && long.sendTestWebhook.message.length).toBeLessThan(200);
  });

  it("leaves another project's budget untouched", async () => {
    const other = await createProject(h.db.prisma, "Other tenant");
    const headers = { "x-api-key": other.secretKey };
    const hook = await webhookOf(headers);
    const r = await h.op(SendTestWebhookDocument, { webhookId: hook, eventType: "user.created" }, headers);
    expect(r.sendTestWebhook.__typename).toBe("SendTestWebhookPayload");
    expect(await testEvents(other.project.id)).toBe(1);
  });
});
