// A list without page arguments is priced at the rows it can hold (docs/graphql.md, "Operation
// limits"). An event's deliveries (one per webhook, up to 20) were priced as one row, so
// `event { deliveries { webhook { deliveries(first: 100) { … } } } }` fetched a page of every
// webhook of the project for the price of one: two such aliases held every database connection
// for 8 s, and other projects' requests got 503. A viewer's authorizedApps (up to 100) and a
// looked-up account's sessions and passkeys (up to 50 each) were one row each too.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listSizes } from "../src/graphql/limits.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

const EVERY_WEBHOOKS_PAGE = `query($id: ID!) { event(id: $id) { id deliveries { webhook { stats { pending }
  deliveries(first: 100) { totalCount edges { node { id attemptLog { id requestHeaders } } } } } } } }`;
const ONE_WEBHOOKS_PAGE = `query($id: ID!, $hook: ID!) { event(id: $id) { id deliveries(webhookId: $hook) { webhook { stats { pending }
  deliveries(first: 100) { totalCount edges { node { id attemptLog { id requestHeaders } } } } } } } }`;

describe.each(backends)("the price of unpaged lists on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  it("prices an event's deliveries at one per webhook the project may hold, and refuses a page of each webhook's deliveries beneath them", async () => {
    expect(listSizes(h.config)["Event.deliveries"]).toEqual({ rows: 20, unless: "webhookId" });
    const refused = await h.gql(EVERY_WEBHOOKS_PAGE, { id: "evt_anything" });
    expect(refused.status).toBe(400);
    expect(refused.body.data).toBeUndefined();
    expect(refused.body.errors).toEqual([expect.objectContaining({ message: expect.stringMatching(/Cost limit/), extensions: expect.objectContaining({ code: "QUERY_TOO_COMPLEX" }) })]);
  });

  it("prices the deliveries narrowed only by a webhookId that may be null as every webhook's", async () => {
    // null returns every webhook's delivery, so priced as one row it fetched a page of each (31st review)
    const nullable = ONE_WEBHOOKS_PAGE.replace("$hook: ID!", "$hook: ID");
    for (const [doc, variables] of [
      [nullable, { id: "evt_anything", hook: null }],
      [nullable, { id: "evt_anything", hook: "wh_anything" }],
      [ONE_WEBHOOKS_PAGE.replace("$hook: ID!", "").replace("webhookId: $hook", "webhookId: null"), { id: "evt_anything" }],
    ] as const) {
      const refused = await h.gql(doc, variables);
      expect(refused.status).toBe(400);
      expect(refused.body.errors).toEqual([expect.objectContaining({ extensions: expect.objectContaining({ code: "QUERY_TOO_COMPLEX" }) })]);
    }
    const literal = await h.gql(ONE_WEBHOOKS_PAGE.replace("$hook: ID!", "").replace("webhookId: $hook", 'webhookId: "wh_anything"'), { id: "evt_anything" });
    expect(literal.body).toEqual({ data: { event: null } });
  });

  it("prices the deliveries narrowed to one webhook as one row, so the dashboard's event search still runs", async () => {
    const ran = await h.gql(ONE_WEBHOOKS_PAGE, { id: "evt_anything", hook: "wh_anything" });
    expect(ran.status).toBe(200);
    expect(ran.body).toEqual({ data: { event: null } });
  });

  const aliases = (n: number, field: string) => `{ ${Array.from({ length: n }, (_, i) => `a${i}: ${field}`).join(" ")} }`;
  const refusedForCost = (res: { status: number; body: any }) => {
    expect(res.status).toBe(400);
    expect(res.body.data).toBeUndefined();
    expect(res.body.errors).toEqual([expect.objectContaining({ message: expect.stringMatching(/Cost limit/), extensions: expect.objectContaining({ code: "QUERY_TOO_COMPLEX" }) })]);
  };

  it("prices a viewer's authorizedApps at the 100 it lists, everything selected of each app multiplied by that", async () => {
    // priced as one row, each alias cost 8 and 30 of them read up to 3,000 apps; now each costs 602
    const apps = `viewer { authorizedApps { clientId name scopes allowedAt } }`;
    refusedForCost(await h.gql(aliases(9, apps)));
    const { token } = await h.signIn({ email: "apps@example.com" });
    const eight = await h.gql(aliases(8, apps), {}, { "x-api-key": h.publishableKey, authorization: `Bearer ${token}` });
    expect(eight.status).toBe(200);
    expect(eight.body).toEqual({ data: Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`a${i}`, { authorizedApps: [] }])) });
  });

  it("prices a looked-up account's sessions and passkeys at the 50 each lists", async () => {
    // priced as one row each, a lookup's sessions cost 15 and its passkeys 14; now 456 and 406
    const lookup = (list: string) => `lookupAccount(accountId: "acc_nobody") { ... on AccountLookup { account { ${list} } } }`;
    const sessions = lookup(`sessions { id createdAt authTime lastUsedAt expiresAt clientAddress userAgent }`);
    const passkeys = lookup(`passkeys { id name createdAt lastUsedAt deviceType backedUp }`);
    refusedForCost(await h.gql(aliases(11, sessions)));
    refusedForCost(await h.gql(aliases(13, passkeys)));
    for (const [n, field] of [
      [10, sessions],
      [12, passkeys],
    ] as const) {
      const ran = await h.gql(aliases(n, field));
      expect(ran.status).toBe(200);
      expect(ran.body).toEqual({ data: Object.fromEntries(Array.from({ length: n }, (_, i) => [`a${i}`, { account: null }])) });
    }
  });

  it("follows LINKGATE_WEBHOOKS_PER_PROJECT up to 20, so a raised cap leaves the dashboard's user lookup under the budget", () => {
    expect(listSizes({ webhooksPerProject: 3 })["Event.deliveries"]).toEqual({ rows: 3, unless: "webhookId" });
    expect(listSizes({ webhooksPerProject: 110 })["Event.deliveries"]).toEqual({ rows: 20, unless: "webhookId" });
  });
});
