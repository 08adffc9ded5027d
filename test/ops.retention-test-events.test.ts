// The events pull never shows test events (sendTestWebhook), so their removal by retention
// loses a reader nothing. The sweep's mark (event_retention, the highest seq it removed) counted
// them too: a quiet project's reader, caught up, whose project had sent a test event since, was
// told CursorExpired once that test event aged out, though it pulled every day and no event it
// could read was removed (docs/operations.md, "How far back the events pull reaches": a reader
// that pulls at least once per retention period never sees CursorExpired).
import { describe, expect, it } from "vitest";
import { sweepOnce } from "../src/retention/sweep.ts";
import { backends } from "./support/db.ts";
import { harnessFor } from "./support/hooks.ts";

const PULL = `query($after: String) { events(after: $after, first: 100) {
  __typename ... on Error { message } ... on EventPage { endCursor hasMore events { body } } } }`;

describe.each(backends)("a test event aged out, on %s", (backend) => {
  const h = harnessFor(backend);
  const pull = async (after?: string | null) => (await h.gql(PULL, { after })).body.data.events;
  const sql = (q: string, ...values: unknown[]) => h.db.prisma.$executeRawUnsafe(q, ...values);

  it("does not expire the cursor of a reader that missed nothing", async () => {
    await h.signIn({ email: "quiet@example.com" });
    const caughtUp = (await pull()).endCursor;
    expect(caughtUp).toBeTruthy();

    const hook = await h.gql(`mutation { createWebhook(input: { url: "http://127.0.0.1:9/hook", events: ["user.created"] }) { ... on CreateWebhookPayload { webhook { id } } } }`);
    const webhookId = hook.body.data.createWebhook.webhook.id;
    const sent = await h.gql(`mutation($id: ID!) { sendTestWebhook(webhookId: $id, eventType: "user.created") { __typename } }`, { id: webhookId });
    expect(sent.body.data.sendTestWebhook.__typename, JSON.stringify(sent.body)).toBe("SendTestWebhookPayload");
    // the reader pulls daily: nothing new for it
    expect(await pull(caughtUp)).toMatchObject({ __typename: "EventPage", events: [] });

    // a month on, every event so far is past the retention, its deliveries long settled
    await sql(`UPDATE outbox_events SET created_at = now() - interval '40 days'`);
    await sql(`UPDATE deliveries SET status = 'failed', completed_at = now() - interval '40 days'`);
    expect((await sweepOnce(h.db, h.config.retention)).deleted.outbox_events).toBeGreaterThan(0);

    expect(await pull(caughtUp)).toMatchObject({ __typename: "EventPage", events: [], endCursor: caughtUp });
  });
});
