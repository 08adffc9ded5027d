// Refusing a document takes work in proportion to the document, however its fragments nest
// (docs/graphql.md, "Operation limits"). The price of a webhook's `totalCount` walked every
// fragment again at each spread: a chain of fragments each spreading the one before twice,
// `fragment F1 on WebhookDeliveriesConnection { ...F0 ...F0 }` and so on, 22 deep in 2 KB and
// 250 tokens, took 10 s of the gateway's only thread, and each level more doubled that (150
// levels fit under the token limit). The limits run before any credential is read, so anyone
// without a key could stall every request of a process with one POST. The work is counted here
// (selection sets read), never timed: a count does not flake when the machine is busy.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { refusalWork } from "./support/graphql-work.ts";

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
  });
  afterAll(() => h?.close());

  it("refuses a chain of doubling fragments at its 31st totalCount at one place, before pricing or validating it, without a key", async () => {
    // 22 levels: 10 s before, on a quiet machine; each level more doubled it
    const message = 'Limit of 30 fields at one place of the answer exceeded, found 31 of "totalCount".';
    const res = await h.call("POST", "/graphql", { body: { query: fanout(22) }, headers: { "x-api-key": "" } });
    expect(res.status).toBe(400);
    expect(res.body.errors).toEqual([expect.objectContaining({ message, extensions: expect.objectContaining({ code: "QUERY_TOO_COMPLEX" }) })]);
    // The field walk stops at the 31st `totalCount` at one place of the answer, before the cost
    // rule and graphql-js' rules run (docs/graphql.md, "Operation limits"). Spread out, 22 levels
    // hold 2^22 counts; the walk reads 82 selection sets: the operation's 3, F22 down to F6 once
    // each (17), and 62 of the 63 spreads of F5 and beneath it, whose 32 leaves hold the first
    // 32 counts. 40 levels read only their 18 fragments more on the way down.
    expect(refusalWork(h.app.deps, fanout(22))).toEqual({ refusal: message, stage: "limits", selectionSetsRead: 3 + 17 + 62 });
    expect(refusalWork(h.app.deps, fanout(40))).toEqual({ refusal: message, stage: "limits", selectionSetsRead: 3 + 17 + 18 + 62 });
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
