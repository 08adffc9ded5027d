// A webhook changed while another request deletes it (docs/webhooks.md, "Managing endpoints").
// updateWebhook read the webhook, then wrote it with Prisma's update, which throws when no row
// matches: a deletion committed in between answered INTERNAL_SERVER_ERROR ("Unexpected error.",
// logged as a fault) instead of WebhookNotFound. rotateWebhookSecret, whose write is
// conditional on the secret it read, told the caller the webhook had been rotated concurrently
// and to try again. Both answer WebhookNotFound now and change nothing. An event emitted at that
// moment (a sign-in's, a test event) found the webhook, and its delivery's foreign key check
// failed once the deletion committed: the sign-in answered 500. The event now waits for the
// deletion and skips the webhook (src/webhooks/outbox.sql).
// An enable racing the workers' disabling of a dead webhook (docs/webhooks.md: enabled again, a
// webhook starts its failure record afresh) read the webhook enabled, so it kept the record that
// had just disabled it, and the workers' next check disabled it again; the write is conditional
// on what it read now, and an enable that finds the webhook disabled starts the record afresh.
// replayFailedWebhookDeliveries read the webhook, then its batches waited for the deliveries the
// deletion took with it and found none: it answered a replay of 0, not WebhookNotFound.
// Postgres only: a second connection deletes the webhook and holds its row until the request's
// write comes to wait for it, then commits; on PGlite one connection serves everything in turn.
import { describe, expect, it } from "vitest";
import { CreateWebhookDocument, ReplayFailedDocument, RotateWebhookSecretDocument, SendTestWebhookDocument, UpdateWebhookDocument } from "./generated/operations.ts";
import { serverUrl } from "./support/db.ts";
import { harnessFor } from "./support/hooks.ts";
import { committedUnder, lockHolder, waitingForLock } from "./support/locks.ts";

const onPostgres = serverUrl ? describe : describe.skip;

onPostgres("a webhook deleted while a request changes it", () => {
  const h = harnessFor("postgres");
  const blocker = lockHolder(h);
  const DELETE_WEBHOOK = "DELETE FROM webhooks WHERE id = $1";

  async function newWebhook(): Promise<string> {
    const created = await h.op(CreateWebhookDocument, { input: { url: "https://127.0.0.1:9/hook", events: ["user.created"] } });
    if (created.createWebhook.__typename !== "CreateWebhookPayload") throw new Error(created.createWebhook.__typename);
    return created.createWebhook.webhook.id;
  }

  it.each([
    ["a description", { description: "renamed" }],
    ["enabled", { enabled: false }],
    ["the url", { url: "https://127.0.0.1:9/moved" }],
  ])("updateWebhook of %s answers WebhookNotFound, not a fault", async (_, input) => {
    const webhookId = await newWebhook();
    const updated = await committedUnder(blocker, DELETE_WEBHOOK, [webhookId], () => h.op(UpdateWebhookDocument, { id: webhookId, input }));
    expect(updated.updateWebhook).toEqual({ __typename: "WebhookNotFound", message: "no such webhook" });
    expect(await h.db.prisma.webhook.count({ where: { id: webhookId } })).toBe(0);
  });

  it("rotateWebhookSecret answers WebhookNotFound, not that rotating again would help", async () => {
    const webhookId = await newWebhook();
    const rotated = await committedUnder(blocker, DELETE_WEBHOOK, [webhookId], () => h.op(RotateWebhookSecretDocument, { webhookId }));
    expect(rotated.rotateWebhookSecret).toEqual({ __typename: "WebhookNotFound", message: "no such webhook" });
  });

  it("a sign-in whose events go out while the project deletes their webhook signs in, and nothing is queued for the deleted webhook", async () => {
    const webhookId = await newWebhook();
    const start = await h.call("POST", "/auth/otp/start", { body: { email: "deleted-under@example.com" } });
    const otp = await h.mailbox.otp("deleted-under@example.com");
    const verify = await committedUnder(blocker, DELETE_WEBHOOK, [webhookId], () => h.call("POST", "/auth/otp/verify", { body: { state_id: start.body.state_id, otp } }));
    expect(verify.status).toBe(200);
    expect(await h.db.prisma.delivery.count({ where: { webhookId } })).toBe(0);
    expect(await h.db.prisma.outboxEvent.count({ where: { projectId: h.projectId, eventType: "user.created", body: { contains: verify.body.account_id } } })).toBe(1);
  });

  it("a test event sent while its webhook is deleted is no fault, and queues nothing", async () => {
    const webhookId = await newWebhook();
    const sent = await committedUnder(blocker, DELETE_WEBHOOK, [webhookId], () => h.gql(`mutation($id: ID!) { sendTestWebhook(webhookId: $id, eventType: "user.created") { __typename } }`, { id: webhookId }));
    expect(sent.body.errors).toBeUndefined();
    expect(await h.db.prisma.delivery.count({ where: { webhookId } })).toBe(0);
  });

  it("an enable racing the workers' disabling of a dead webhook turns it on with a fresh record, as an enable of a disabled webhook does", async () => {
    const webhookId = await newWebhook();
    const countedFrom = new Date("2026-01-01T00:00:00Z");
    await h.db.prisma.webhook.update({ where: { id: webhookId }, data: { failuresCountedFrom: countedFrom } });
    // the blocker is disableDeadWebhooks (src/delivery/dead-webhooks.ts): the request read the
    // webhook enabled, and its write waits for the disabling
    await blocker.query("BEGIN");
    let updated;
    try {
      await blocker.query("UPDATE webhooks SET enabled = false, disabled_reason = 'every delivery attempt failed for 24 hours' WHERE id = $1", [webhookId]);
      const answer = h.op(UpdateWebhookDocument, { id: webhookId, input: { enabled: true } });
      await waitingForLock(blocker, 1);
      await blocker.query("COMMIT");
      updated = await answer;
    } finally {
      await blocker.query("ROLLBACK").catch(() => {});
    }
    expect(updated.updateWebhook).toMatchObject({ __typename: "UpdateWebhookPayload", webhook: { enabled: true, disabledReason: null } });
    const stored = await h.db.prisma.webhook.findUniqueOrThrow({ where: { id: webhookId } });
    expect(stored.enabled).toBe(true);
    expect(stored.failuresCountedFrom!.getTime()).toBeGreaterThan(countedFrom.getTime());
  });

  it("a replay of a webhook deleted meanwhile is WebhookNotFound, not a replay of nothing", async () => {
    const webhookId = await newWebhook();
    await h.op(SendTestWebhookDocument, { webhookId, eventType: "user.created" });
    await h.db.prisma.delivery.updateMany({ where: { webhookId }, data: { status: "failed", leaseUntil: null, leasedBy: null } });
    const replayed = await committedUnder(blocker, DELETE_WEBHOOK, [webhookId], () => h.op(ReplayFailedDocument, { webhookId, since: new Date(Date.now() - 60_000).toISOString() }));
    expect(replayed.replayFailedWebhookDeliveries).toEqual({ __typename: "WebhookNotFound", message: "no such webhook" });
  });

  it("an update of a webhook that stays still answers it as it is now", async () => {
    const webhookId = await newWebhook();
    const updated = await h.op(UpdateWebhookDocument, { id: webhookId, input: { description: "kept", enabled: false } });
    expect(updated.updateWebhook).toMatchObject({
      __typename: "UpdateWebhookPayload",
      webhook: { id: webhookId, description: "kept", enabled: false, disabledReason: "disabled by the project", url: "https://127.0.0.1:9/hook" },
    });
  });
});
