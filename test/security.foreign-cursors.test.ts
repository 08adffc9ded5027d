// A page cursor naming another project's row is a cursor that names no row (docs/graphql.md):
// Prisma placed a page after a cursor's row found by id alone, outside the project's filter, so
// project A could build a cursor from one of B's ids and learn from the page whether that id
// exists and when it was made (22nd review).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

const cursorOf = (id: string) => Buffer.from(`GPC:S:${id}`).toString("base64");

describe.each(backends)("cursors of another project on %s", (backend) => {
  let h: Harness;
  let otherKey: string;
  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_WEBHOOK_ALLOW_PRIVATE: "1" } });
    const created = await h.gql(`mutation { createProject(name: "other") { ... on CreateProjectPayload { apiKey } } }`, {}, { "x-admin-token": h.adminToken });
    otherKey = created.body.data.createProject.apiKey;
  });
  afterAll(() => h?.close());

  const as = (key: string) => ({ "x-api-key": key });
  async function webhookOf(key: string, n: number): Promise<string> {
    const r = await h.gql(`mutation($url: String!) { createWebhook(input: { url: $url, events: ["user.created"] }) { ... on CreateWebhookPayload { webhook { id } } } }`, { url: `http://127.0.0.1:9/hook-${n}` }, as(key));
    return r.body.data.createWebhook.webhook.id;
  }
  async function clientOf(key: string, n: number): Promise<string> {
    const r = await h.gql(
      `mutation($input: OAuthClientInput!) { createOAuthClient(input: $input) { ... on OAuthClientWithSecret { client { id } } } }`,
      { input: { name: `app ${n}`, redirectUris: [`https://app${n}.example/cb`], type: "PUBLIC" } },
      as(key),
    );
    return r.body.data.createOAuthClient.client.id;
  }

  it("webhooks(after:) and oauthClients(after:) with another project's id answer as for an id that does not exist", async () => {
    const foreignHook = await webhookOf(otherKey, 0);
    const foreignClient = await clientOf(otherKey, 0);
    for (let n = 1; n <= 3; n++) {
      await webhookOf(h.apiKey, n);
      await clientOf(h.apiKey, n);
    }
    const page = async (field: string, after: string) =>
      (await h.gql(`query($after: String) { ${field}(first: 50, after: $after) { edges { node { id } } } }`, { after })).body.data[field].edges;
    expect(await page("webhooks", cursorOf(foreignHook))).toEqual(await page("webhooks", cursorOf("wh_doesnotexist")));
    expect(await page("webhooks", cursorOf(foreignHook))).toEqual([]);
    expect(await page("oauthClients", cursorOf(foreignClient))).toEqual([]);
    // the project's own cursors still page
    const own = await page("webhooks", cursorOf((await page("webhooks", null as never))[0].node.id));
    expect(own).toHaveLength(2);
  });
});
