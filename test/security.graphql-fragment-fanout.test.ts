// Pricing a document takes time in proportion to the document, however its fragments nest
// (docs/graphql.md, "Operation limits"). The price of a webhook's `totalCount` walked every
// fragment again at each spread: a chain of fragments each spreading the one before twice,
// `fragment F1 on WebhookDeliveriesConnection { ...F0 ...F0 }` and so on, 22 deep in 2 KB and
// 250 tokens, took 10 s of the gateway's only thread, and each level more doubled that (150
// levels fit under the token limit). The limits run before any credential is read, so anyone
// without a key could stall every request of a process with one POST. Fixed, it takes a few
// milliseconds: the bound below is a hundred times that, and a tenth of what it took before.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

/** F0 selects one count; each F(i) spreads F(i-1) twice, so F(n) selects 2^n counts. */
function fanout(levels: number): string {
  const fragments = [`fragment F0 on WebhookDeliveriesConnection { totalCount }`];
  for (let i = 1; i <= levels; i++) fragments.push(`fragment F${i} on WebhookDeliveriesConnection { ...F${i - 1} ...F${i - 1} }`);
  return `{ webhook(id: "wh_anything") { deliveries(first: 1) { ...F${levels} } } } ${fragments.join(" ")}`;
}

describe.each(backends)("fragments spread many times over on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
    // the first GraphQL request of a process pays for loading; the timings below are the pricing's
    await h.gql(`{ eventTypes }`);
  });
  afterAll(() => h?.close());

  it("refuses a chain of doubling fragments at once, without a key", async () => {
    // 22 levels: 10 s before, on a quiet machine; each level more doubled it
    const started = performance.now();
    const res = await h.call("POST", "/graphql", { body: { query: fanout(22) }, headers: { "x-api-key": "" } });
    const elapsed = performance.now() - started;
    expect(res.status).toBe(400);
    // the 31st `totalCount` at one place of the answer, before its cost is priced (docs/graphql.md, "Operation limits")
    expect(res.body.errors).toEqual([expect.objectContaining({ message: expect.stringMatching(/found 31 of "totalCount"/), extensions: expect.objectContaining({ code: "QUERY_TOO_COMPLEX" }) })]);
    expect(elapsed).toBeLessThan(1000);
  });

  it("still counts every spread: a fragment spread twice counts its totalCount twice", async () => {
    // two levels: four counts, 4,000 and more, under the budget of 5,000; three levels: eight, refused
    const two = await h.gql(fanout(2));
    expect(two.status).toBe(200);
    expect(two.body).toEqual({ data: { webhook: null } });
    const three = await h.gql(fanout(3));
    expect(three.status).toBe(400);
    expect(three.body.errors[0].message).toMatch(/Cost limit/);
  });
});
