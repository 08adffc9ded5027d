// A field that counts over a whole list costs AGGREGATE_COST, beside its connection's page
// (docs/graphql.md, "Operation limits"). A webhook's `deliveries { totalCount }` counts its whole
// log, yet was priced as one value times the page, so `first: 1` made it nearly free: 27 aliases
// of `webhooks(first: 20) { … deliveries(first: 1) { totalCount } }` (cost 4,860, under the
// budget of 5,000) counted the project's whole delivery log 27 times, 4 s of database time at
// 200,000 deliveries on Postgres, and four such requests at once took 11 s.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATIONS } from "../dashboard/src/operations.ts";
import { AGGREGATE_COST } from "../src/graphql/limits.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

const aliases = (n: number, field: string) => `{ ${Array.from({ length: n }, (_, i) => `a${i}: ${field}`).join(" ")} }`;
const EVERY_LOG_COUNTED = aliases(27, `webhooks(first: 20) { edges { node { deliveries(first: 1) { totalCount } } } }`);
const oneCount = (id: string) => `webhook(id: "${id}") { deliveries(first: 1, status: failed) { totalCount } }`;

describe.each(backends)("the price of counting a webhook's deliveries on %s", (backend) => {
  let h: Harness;
  let webhookId = "";
  beforeAll(async () => {
    h = await startHarness(backend);
    const created = await h.gql(
      `mutation($input: WebhookInput!) { createWebhook(input: $input) { __typename ... on CreateWebhookPayload { webhook { id } } } }`,
      { input: { url: "http://127.0.0.1:9/hook", events: ["user.created"], description: "counted" } },
    );
    webhookId = created.body.data.createWebhook.webhook.id;
  });
  afterAll(() => h?.close());

  const refusedForCost = (res: { status: number; body: any }) => {
    expect(res.status).toBe(400);
    expect(res.body.data).toBeUndefined();
    expect(res.body.errors).toEqual([expect.objectContaining({ message: expect.stringMatching(/Cost limit/), extensions: expect.objectContaining({ code: "QUERY_TOO_COMPLEX" }) })]);
  };

  it("refuses a document that counts every webhook's log in each of its aliases", async () => {
    refusedForCost(await h.gql(EVERY_LOG_COUNTED));
  });

  it("prices each count the same whatever the page beside it, so a document holds at most four", async () => {
    refusedForCost(await h.gql(aliases(5, oneCount(webhookId))));
    const four = await h.gql(aliases(4, oneCount(webhookId)));
    expect(four.status).toBe(200);
    expect(four.body).toEqual({ data: Object.fromEntries([0, 1, 2, 3].map((i) => [`a${i}`, { deliveries: { totalCount: 0 } }])) });
    // counted in a fragment, or twice under two names, each count is priced
    const spread = `{ webhook(id: "${webhookId}") { d: deliveries(first: 1) { ...Count ...Count b: totalCount c: totalCount d: totalCount } } }
      fragment Count on WebhookDeliveriesConnection { totalCount }`;
    refusedForCost(await h.gql(spread));
    expect(AGGREGATE_COST).toBe(1000);
  });

  it("still runs a page of the log with its count, and every document the dashboard sends", async () => {
    const page = await h.gql(`query($id: ID!) { webhook(id: $id) { deliveries(first: 50) { totalCount edges { node { id status attemptLog { attempt statusCode } } } } } }`, {
      id: webhookId,
    });
    expect(page.body).toEqual({ data: { webhook: { deliveries: { totalCount: 0, edges: [] } } } });
    for (const [name, doc] of Object.entries(OPERATIONS)) {
      const res = await h.gql(doc, {});
      // sent without its variables, each is refused for those (a 400 after the limits), never for its cost
      expect(res.body.errors?.map((e: { extensions?: { code?: string } }) => e.extensions?.code) ?? [], name).not.toContain("QUERY_TOO_COMPLEX");
    }
  });
});
