// One project's webhooks share the delivery workers with every other project's (docs/webhooks.md,
// "Limits"). Deliveries take turns by webhook, so a project with hundreds of endpoints that each
// answer just under the timeout held every send slot: another project's delivery waited 10.7 s
// behind 300 of them. A project holds at most 20 webhooks unless LINKGATE_WEBHOOKS_PER_PROJECT
// says otherwise.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CreateWebhookDocument, DeleteWebhookDocument } from "./generated/operations.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

describe.each(backends)("webhooks per project on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const create = (i: number) => h.op(CreateWebhookDocument, { input: { url: `https://127.0.0.1:9/hook/${i}`, events: ["user.created"] } });

  it("takes 20, refuses the 21st with InvalidRequest even when creates race for the last places, and takes one again after a delete", async () => {
    expect(h.config.webhooksPerProject).toBe(20); // the default
    for (let i = 0; i < 18; i++) expect((await create(i)).createWebhook.__typename).toBe("CreateWebhookPayload");

    const racing = await Promise.all([18, 19, 20, 21, 22].map(create));
    const kinds = racing.map((r) => r.createWebhook.__typename).sort();
    expect(kinds).toEqual(["CreateWebhookPayload", "CreateWebhookPayload", "InvalidRequest", "InvalidRequest", "InvalidRequest"]);
    expect(await h.db.prisma.webhook.count({ where: { projectId: h.projectId } })).toBe(20);
    const refused = racing.find((r) => r.createWebhook.__typename === "InvalidRequest")!.createWebhook;
    expect(refused).toMatchObject({ message: expect.stringContaining("at most 20 webhooks") });

    const some = await h.db.prisma.webhook.findFirstOrThrow({ where: { projectId: h.projectId } });
    expect((await h.op(DeleteWebhookDocument, { id: some.id })).deleteWebhook.__typename).toBe("DeleteWebhookPayload");
    expect((await create(23)).createWebhook.__typename).toBe("CreateWebhookPayload");
  });
});
