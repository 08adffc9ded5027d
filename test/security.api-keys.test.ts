// The key a front-end app ships (publishable) signs users in and acts for them, and nothing
// else: anyone can read it out of the app, so it must not reach webhooks, deliveries or events.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

/** Every operation only the secret key may do, with arguments that would otherwise run. */
const SECRET_ONLY: Array<[name: string, doc: string]> = [
  ["webhooks", `{ webhooks { __typename } }`],
  ["webhook", `{ webhook(id: "wh_x") { id } }`],
  ["events", `{ events { __typename } }`],
  ["createWebhook", `mutation { createWebhook(input: { url: "https://example.com/hook", events: ["user.created"] }) { __typename } }`],
  ["updateWebhook", `mutation { updateWebhook(id: "wh_x", input: { description: "x" }) { __typename } }`],
  ["deleteWebhook", `mutation { deleteWebhook(id: "wh_x") { __typename } }`],
  ["rotateWebhookSecret", `mutation { rotateWebhookSecret(webhookId: "wh_x") { __typename } }`],
  ["sendTestWebhook", `mutation { sendTestWebhook(webhookId: "wh_x", eventType: "user.created") { __typename } }`],
  ["redeliverWebhookDelivery", `mutation { redeliverWebhookDelivery(deliveryId: "dlv_x") { __typename } }`],
  ["replayFailedWebhookDeliveries", `mutation { replayFailedWebhookDeliveries(webhookId: "wh_x", since: "2026-01-01T00:00:00Z") { __typename } }`],
];

describe.each(backends)("publishable and secret keys on %s", (backend) => {
  let h: Harness;
  let webhookId: string;
  beforeAll(async () => {
    h = await startHarness(backend);
    const created = await h.gql(
      `mutation { createWebhook(input: { url: "http://127.0.0.1:9/hook", events: ["user.created"] }) { ... on CreateWebhookPayload { webhook { id } } } }`,
    );
    webhookId = created.body.data.createWebhook.webhook.id;
  });
  afterAll(() => h?.close());
  const pk = () => ({ "x-api-key": h.publishableKey });

  it("a publishable key signs a user in, links, reads the viewer and updates the profile", async () => {
    const start = await h.call("POST", "/auth/otp/start", { body: { email: "pk-user@example.com" }, headers: pk() });
    expect(start.status).toBe(200);
    const verify = await h.call("POST", "/auth/otp/verify", {
      body: { state_id: start.body.state_id, otp: await h.mailbox.otp("pk-user@example.com") },
      headers: pk(),
    });
    expect(verify.status).toBe(200);
    const user = { ...pk(), authorization: `Bearer ${verify.body.access_token}` };
    const link = await h.call("POST", "/users/link/request", { body: { phone: "+12025550181" }, headers: user });
    expect(link.status).toBe(200);
    const linked = await h.call("POST", "/users/link/verify", { body: { state_id: link.body.state_id, otp: await h.mailbox.otp("+12025550181") }, headers: user });
    expect(linked.body).toMatchObject({ outcome: "attached" });
    const viewer = await h.gql(`{ viewer { id phoneNumber } }`, {}, user);
    expect(viewer.body.data.viewer).toEqual({ id: verify.body.account_id, phoneNumber: "+12025550181" });
    const named = await h.gql(`mutation { updateProfile(name: "Pat") { ... on Account { name } } }`, {}, user);
    expect(named.body.data.updateProfile.name).toBe("Pat");
  });

  it.each(SECRET_ONLY)("a publishable key on %s is refused as SecretKeyRequired, and nothing runs", async (_name, doc) => {
    const before = await h.db.prisma.webhook.findUniqueOrThrow({ where: { id: webhookId } });
    const r = await h.gql(doc, {}, pk());
    expect(r.body.errors?.[0]?.extensions).toMatchObject({ code: "FORBIDDEN", error: "SecretKeyRequired" });
    expect(r.body.errors[0].message).toMatch(/secret key/);
    expect(r.body.data?.[_name] ?? null).toBeNull();
    expect(await h.db.prisma.webhook.findUniqueOrThrow({ where: { id: webhookId } })).toEqual(before);
    expect(await h.db.prisma.webhook.count()).toBe(1);
  });

  it("the secret key may do all of it", async () => {
    const r = await h.gql(`mutation($id: ID!) { sendTestWebhook(webhookId: $id, eventType: "user.created") { __typename } }`, { id: webhookId });
    expect(r.body.data.sendTestWebhook.__typename).toBe("SendTestWebhookPayload");
    const ev = await h.gql(`{ events { ... on EventPage { hasMore } } }`);
    expect(ev.body.errors).toBeUndefined();
  });

  it("rotate-secret with a publishable key is 403 SecretKeyRequired and keeps the secret", async () => {
    const before = await h.db.prisma.webhook.findUniqueOrThrow({ where: { id: webhookId } });
    const r = await h.call("POST", "/api/v1/webhooks/rotate-secret", {
      body: { webhook_id: webhookId },
      headers: { authorization: `Bearer ${h.publishableKey}` },
    });
    expect(r.status).toBe(403);
    expect(r.body).toEqual({ error: "SecretKeyRequired", message: expect.stringMatching(/secret key/) });
    expect((await h.db.prisma.webhook.findUniqueOrThrow({ where: { id: webhookId } })).secretSealed).toBe(before.secretSealed);
    const ok = await h.call("POST", "/api/v1/webhooks/rotate-secret", { body: { webhook_id: webhookId }, headers: { authorization: `Bearer ${h.apiKey}` } });
    expect(ok.status).toBe(200);
  });

  it("createProject returns one key of each kind; createApiKey takes a kind and defaults to SECRET", async () => {
    const admin = { "x-admin-token": h.adminToken };
    const p = await h.gql(
      `mutation { createProject(name: "kinds") { ... on CreateProjectPayload { project { id } secretKey publishableKey apiKey } } }`,
      {},
      admin,
    );
    const { project, secretKey, publishableKey, apiKey } = p.body.data.createProject;
    expect(secretKey).toMatch(/^lg_sk_[A-Za-z0-9_-]{40,}$/);
    expect(publishableKey).toMatch(/^lg_pk_[A-Za-z0-9_-]{40,}$/);
    expect(apiKey).toBe(secretKey);
    const refused = await h.gql(`{ webhooks { __typename } }`, {}, { "x-api-key": publishableKey });
    expect(refused.body.errors[0].extensions.error).toBe("SecretKeyRequired");
    expect((await h.gql(`{ webhooks { __typename } }`, {}, { "x-api-key": secretKey })).body.errors).toBeUndefined();

    const made = await h.gql(`mutation($p: ID!) { createApiKey(projectId: $p, kind: PUBLISHABLE) { ... on NewApiKey { apiKey kind } } }`, { p: project.id }, admin);
    expect(made.body.data.createApiKey).toEqual({ apiKey: expect.stringMatching(/^lg_pk_/), kind: "PUBLISHABLE" });
    const plain = await h.gql(`mutation($p: ID!) { createApiKey(projectId: $p) { ... on NewApiKey { apiKey kind } } }`, { p: project.id }, admin);
    expect(plain.body.data.createApiKey).toEqual({ apiKey: expect.stringMatching(/^lg_sk_/), kind: "SECRET" });
  });

  it("keys stored before the split work as secret keys", async () => {
    const { sha256Hex } = await import("../src/crypto.ts");
    const legacy = "lg_legacyKeyFromBeforeTheSplit0123456789abcdef";
    // the columns the first migration created; `kind` is filled by the migration's default
    await h.db.prisma.$executeRaw`INSERT INTO api_keys (id, project_id, key_hash, prefix) VALUES ('key_legacy', ${h.projectId}, ${sha256Hex(legacy)}, 'lg_legacy')`;
    const r = await h.gql(`{ webhooks { __typename } }`, {}, { "x-api-key": legacy });
    expect(r.body.errors).toBeUndefined();
  });

  it("LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY is stored as the default project's publishable key", async () => {
    const { sha256Hex } = await import("../src/crypto.ts");
    const kindOf = async (key: string) => (await h.db.prisma.apiKey.findUniqueOrThrow({ where: { keyHash: sha256Hex(key) } })).kind;
    expect(await kindOf(h.publishableKey)).toBe("publishable");
    expect(await kindOf(h.apiKey)).toBe("secret");
  });
});
