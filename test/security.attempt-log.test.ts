// A delivery's attempt log has no bound of its own: every redelivery starts a new cycle of up to
// six attempts. It was a plain list returned whole and priced as one row, so a page of 100
// deliveries could answer with every attempt of each. It now shows the latest attempts of one
// schedule unless asked for more (at most 100, priced as a page), and attemptCount says how many
// the log holds (docs/graphql.md, "Operation limits").
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newOrderedId } from "../src/ids.ts";
import { CreateWebhookDocument, SendTestWebhookDocument } from "./generated/operations.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

const LOGGED = 10;

describe.each(backends)("the attempt log's bound on %s", (backend) => {
  let h: Harness;
  let webhookId: string;
  let eventId: string;
  beforeAll(async () => {
    h = await startHarness(backend);
    const created = await h.op(CreateWebhookDocument, { input: { url: "https://127.0.0.1:9/hook", events: ["user.created"] } });
    if (created.createWebhook.__typename !== "CreateWebhookPayload") throw new Error(created.createWebhook.__typename);
    webhookId = created.createWebhook.webhook.id;
    const sent = await h.op(SendTestWebhookDocument, { webhookId, eventType: "user.created" });
    if (sent.sendTestWebhook.__typename !== "SendTestWebhookPayload") throw new Error(sent.sendTestWebhook.__typename);
    eventId = sent.sendTestWebhook.eventId;
    // two cycles: six failed attempts, a redelivery, and four more
    const delivery = await h.db.prisma.delivery.findFirstOrThrow({ where: { webhookId } });
    const start = Date.now() - 60_000;
    await h.db.prisma.deliveryAttempt.createMany({
      data: Array.from({ length: LOGGED }, (_, i) => ({
        id: newOrderedId("att", start + i * 1000),
        deliveryId: delivery.id,
        attempt: i < 6 ? i + 1 : i - 5,
        startedAt: new Date(start + i * 1000),
        durationMs: 5,
        statusCode: 500,
      })),
    });
  });
  afterAll(() => h?.close());

  const attemptLog = (args: string) =>
    h.gql(`query($e: ID!, $w: ID!) { event(id: $e) { deliveries(webhookId: $w) { attemptCount attemptLog${args} { attempt startedAt } } } }`, { e: eventId, w: webhookId });

  it("shows the latest six attempts, oldest first, and how many the log holds", async () => {
    const res = await attemptLog("");
    expect(res.body.errors).toBeUndefined();
    const [d] = res.body.data.event.deliveries;
    expect(d.attemptCount).toBe(LOGGED);
    expect(d.attemptLog.map((a: { attempt: number }) => a.attempt)).toEqual([5, 6, 1, 2, 3, 4]);
    const times = d.attemptLog.map((a: { startedAt: string }) => Date.parse(a.startedAt));
    expect(times).toEqual([...times].sort((a, b) => a - b));
  });

  it("shows up to 100 when asked, and refuses a size outside 1 to 100 with BAD_USER_INPUT", async () => {
    const all = await attemptLog("(last: 100)");
    expect(all.body.data.event.deliveries[0].attemptLog).toHaveLength(LOGGED);
    for (const last of [0, -1, 101]) {
      const refused = await attemptLog(`(last: ${last})`);
      expect(refused.body.errors?.[0]).toMatchObject({ message: "last must be between 1 and 100", extensions: { code: "BAD_USER_INPUT" } });
    }
  });

  it("prices the log at the attempts it may return, so a page of deliveries with 100 attempts each is refused before it runs", async () => {
    const page = (args: string) => `query($w: ID!) { webhook(id: $w) { deliveries(first: 100) { edges { node { id attemptLog${args} { id requestHeaders startedAt } } } } } }`;
    const refused = await h.gql(page("(last: 100)"), { w: webhookId });
    expect(refused.status).toBe(400);
    expect(refused.body.errors).toEqual([expect.objectContaining({ extensions: expect.objectContaining({ code: "QUERY_TOO_COMPLEX" }) })]);
    const byVariable = await h.gql(page("(last: $n)").replace("($w: ID!)", "($w: ID!, $n: Int)"), { w: webhookId, n: 1 });
    expect(byVariable.body.errors?.[0].extensions.code).toBe("QUERY_TOO_COMPLEX");
    const byDefault = await h.gql(page(""), { w: webhookId });
    expect(byDefault.body.errors).toBeUndefined();
    expect(byDefault.body.data.webhook.deliveries.edges[0].node.attemptLog).toHaveLength(6);
  });
});
