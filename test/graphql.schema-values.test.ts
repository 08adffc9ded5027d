// What the schema's descriptions promise, on the wire: the fields that became enums send the same
// words they sent as strings, and the described totalCount counts what the filters match,
// selected alone or with a page.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";

const ORIGIN = "http://localhost:4000"; // the harness's default issuer: passkeys are for "localhost"

describe.each(backends)("GraphQL schema values on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  async function registerPasskey(token: string) {
    const opts = await h.gql(`mutation { startPasskeyRegistration { ... on PasskeyCreationOptions { options } } }`, {}, bearer(token));
    const response = new SoftAuthenticator(ORIGIN).create(opts.body.data.startPasskeyRegistration.options);
    const r = await h.gql(`mutation($r: JSON!) { finishPasskeyRegistration(response: $r) { __typename } }`, { r: response }, bearer(token));
    expect(r.body.data.finishPasskeyRegistration.__typename).toBe("Passkey");
  }

  it("status, mergeRole, authMethod and deviceType send the words they sent as strings", async () => {
    const user = await h.signIn({ email: "enum-values@example.com" });
    await registerPasskey(user.token);
    const r = await h.gql(
      `{ viewer { status mergeRole sessions { edges { node { authMethod } } } passkeys { edges { node { deviceType } } } } }`,
      {},
      bearer(user.token),
    );
    expect(r.body).toEqual({
      data: {
        viewer: {
          status: "active",
          mergeRole: null,
          sessions: { edges: [{ node: { authMethod: "otp" } }] },
          passkeys: { edges: [{ node: { deviceType: expect.stringMatching(/^(singleDevice|multiDevice)$/) } }] },
        },
      },
    });
    const stored = await h.db.prisma.passkey.findFirstOrThrow({ where: { accountId: user.accountId } });
    expect(r.body.data.viewer.passkeys.edges[0].node.deviceType).toBe(stored.deviceType);
  });

  it("totalCount counts the deliveries the filters match, alone or with a page", async () => {
    const created = await h.gql(
      `mutation($i: WebhookInput!) { createWebhook(input: $i) { ... on CreateWebhookPayload { webhook { id } } } }`,
      { i: { url: "https://127.0.0.1:9/hook", events: ["user.created", "user.deleted"] } },
    );
    const id = created.body.data.createWebhook.webhook.id;
    for (const type of ["user.created", "user.created", "user.created", "user.deleted", "user.deleted"]) {
      const sent = await h.gql(`mutation($id: ID!, $t: String!) { sendTestWebhook(webhookId: $id, eventType: $t) { __typename } }`, { id, t: type });
      expect(sent.body.data.sendTestWebhook.__typename).toBe("SendTestWebhookPayload");
    }
    const count = async (selection: string, eventType?: string) =>
      (await h.gql(`query($id: ID!, $t: String) { webhook(id: $id) { deliveries(first: 1, eventType: $t) { ${selection} } } }`, { id, t: eventType }))
        .body.data.webhook.deliveries;
    expect(await count("totalCount")).toEqual({ totalCount: 5 });
    expect(await count("totalCount", "user.created")).toEqual({ totalCount: 3 });
    const page = await count("totalCount edges { node { eventType } }", "user.deleted");
    expect(page).toEqual({ totalCount: 2, edges: [{ node: { eventType: "user.deleted" } }] });
  });
});
