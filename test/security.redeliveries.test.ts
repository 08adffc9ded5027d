// A project's secret key cannot have the shared workers POST to an address as fast as it can
// call (docs/security.md, "Abuse limits"): every redeliverWebhookDelivery sends the body again at
// once, whatever the delivery's state, and nothing bounded them. A project redelivers at most 100
// deliveries in 10 minutes; an unknown id is DeliveryNotFound and costs nothing; another
// project's budget is its own. A delivery deleted with its webhook right after its reset was read
// back with findFirstOrThrow, which answered INTERNAL_SERVER_ERROR: it is DeliveryNotFound.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProject } from "../src/auth/projects.ts";
import { REDELIVERIES_PER_PROJECT } from "../src/delivery/redelivery.ts";
import { CreateWebhookDocument, RedeliverDocument, SendTestWebhookDocument } from "./generated/operations.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

describe.each(backends)("redeliveries on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  /** A delivery of a test event to a new webhook of the project the key belongs to. */
  async function deliveryOf(headers?: Record<string, string>): Promise<string> {
    const created = await h.op(CreateWebhookDocument, { input: { url: "https://127.0.0.1:9/hook", events: ["user.created"] } }, headers);
    if (created.createWebhook.__typename !== "CreateWebhookPayload") throw new Error(created.createWebhook.__typename);
    const webhookId = created.createWebhook.webhook.id;
    const sent = await h.op(SendTestWebhookDocument, { webhookId, eventType: "user.created" }, headers);
    expect(sent.sendTestWebhook.__typename).toBe("SendTestWebhookPayload");
    return (await h.db.prisma.delivery.findFirstOrThrow({ where: { webhookId } })).id;
  }

  /** One request of `count` aliased redeliveries of the same id, run in order. */
  async function redeliver(deliveryId: string, count: number, headers?: Record<string, string>) {
    const fields = Array.from({ length: count }, (_, i) => `r${i}: redeliverWebhookDelivery(deliveryId: $id) { __typename ... on RateLimited { retryAfterSeconds } }`);
    const res = await h.gql(`mutation($id: ID!) { ${fields.join(" ")} }`, { id: deliveryId }, headers);
    expect(res.body.errors).toBeUndefined();
    return fields.map((_, i) => res.body.data[`r${i}`].__typename);
  }

  it("takes 100 redeliveries in 10 minutes per project, then answers RateLimited and leaves the delivery as it was", async () => {
    expect(REDELIVERIES_PER_PROJECT).toEqual({ max: 100, windowSeconds: 600 });
    const deliveryId = await deliveryOf();
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(...(await redeliver(deliveryId, 25)));
    expect(answers).toEqual(Array(100).fill("Delivery"));

    // a redelivery that went through would make a failed delivery pending again
    await h.db.prisma.delivery.update({ where: { id: deliveryId }, data: { status: "failed", leaseUntil: null, leasedBy: null } });
    const refused = await h.op(RedeliverDocument, { deliveryId });
    expect(refused.redeliverWebhookDelivery).toMatchObject({ __typename: "RateLimited" });
    const res = await h.gql(`mutation($id: ID!) { redeliverWebhookDelivery(deliveryId: $id) { ... on RateLimited { retryAfterSeconds } } }`, { id: deliveryId });
    const wait = res.body.data.redeliverWebhookDelivery.retryAfterSeconds;
    expect(wait).toBeGreaterThan(0);
    // the budget back once the first of them leaves the sliding window: a window and a quarter at most (docs/security.md)
    expect(wait).toBeLessThanOrEqual(750);
    expect((await h.db.prisma.delivery.findUniqueOrThrow({ where: { id: deliveryId } })).status).toBe("failed");

    // an id the project does not have is still told apart
    const unknown = await h.op(RedeliverDocument, { deliveryId: "dlv_nope" });
    expect(unknown.redeliverWebhookDelivery.__typename).toBe("DeliveryNotFound");
  });

  it("counts only deliveries the project has, and keeps each project's budget its own", async () => {
    const other = await createProject(h.db.prisma, "Other tenant");
    const headers = { "x-api-key": other.secretKey };
    const deliveryId = await deliveryOf(headers);
    const unknown = [];
    for (let i = 0; i < 5; i++) unknown.push(...(await redeliver("dlv_nope", 25, headers)));
    expect(unknown).toEqual(Array(125).fill("DeliveryNotFound"));
    expect(await redeliver(deliveryId, 1, headers)).toEqual(["Delivery"]);
  });

  it("a delivery deleted with its webhook right after its reset is DeliveryNotFound, not a fault", async () => {
    // a project of its own: the tests above spent the default project's redeliveries
    const own = await createProject(h.db.prisma, "Deleting tenant");
    const headers = { "x-api-key": own.secretKey };
    const deliveryId = await deliveryOf(headers);
    const { webhookId } = await h.db.prisma.delivery.findUniqueOrThrow({ where: { id: deliveryId } });
    // The project deletes the webhook between the reset and the read of the delivery it answers:
    // no lock holds that window open, so the database deletes it as the reset writes the row (a
    // trigger of this test's own, on this delivery only), which the read then no longer finds.
    await h.db.prisma.$executeRawUnsafe(`CREATE FUNCTION test_delete_webhook() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN DELETE FROM webhooks WHERE id = NEW.webhook_id; RETURN NULL; END $$`);
    await h.db.prisma.$executeRawUnsafe(`CREATE TRIGGER test_delete_webhook AFTER UPDATE ON deliveries FOR EACH ROW
      WHEN (NEW.id = '${deliveryId}') EXECUTE FUNCTION test_delete_webhook()`);
    let res;
    try {
      res = await h.gql(`mutation($id: ID!) { redeliverWebhookDelivery(deliveryId: $id) { __typename } }`, { id: deliveryId }, headers);
    } finally {
      await h.db.prisma.$executeRawUnsafe(`DROP TRIGGER test_delete_webhook ON deliveries`);
      await h.db.prisma.$executeRawUnsafe(`DROP FUNCTION test_delete_webhook()`);
    }
    expect(await h.db.prisma.webhook.count({ where: { id: webhookId } })).toBe(0);
    expect(res.body).toEqual({ data: { redeliverWebhookDelivery: { __typename: "DeliveryNotFound" } } });
  });
});
