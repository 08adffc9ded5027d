// Names of Object.prototype's members ("constructor", "__proto__", "toString", …) sent where an
// event type is expected are bad input like any other unknown name, never an internal error:
// a lookup in a plain object map answered Object's own members for them (the fuzz test sent
// "constructor" as a delivery-log filter and got INTERNAL_SERVER_ERROR).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { canonicalEventType } from "../src/webhooks/event-types.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";
import { newMasterKey, seedWebhook } from "./support/receiver.ts";

const PROTOTYPE_KEYS = ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf", "prototype"];

it("no prototype member is an event type or an alias", () => {
  for (const name of PROTOTYPE_KEYS) expect(canonicalEventType(name), name).toBeUndefined();
  expect(canonicalEventType("auth.login.success")).toBe("user.authentication.success");
});

describe.each(backends)("prototype member names as event types on %s", (backend) => {
  let h: Harness;
  let webhookId = "";
  beforeAll(async () => {
    h = await startHarness(backend);
    webhookId = (await seedWebhook(h.db, newMasterKey(), { url: "https://127.0.0.1:9/hook", projectId: h.projectId })).webhookId;
  });
  afterAll(() => h?.close());

  it("a delivery-log filter answers BAD_USER_INPUT", async () => {
    for (const eventType of PROTOTYPE_KEYS) {
      for (const paging of ["first: 5", "last: 1"]) {
        const r = await h.gql(`query($id: ID!, $t: String) { webhook(id: $id) { deliveries(${paging}, eventType: $t, status: failed) { totalCount edges { node { id } } } } }`, {
          id: webhookId,
          t: eventType,
        });
        expect(r.status, eventType).toBeLessThan(500);
        expect(r.body.errors?.[0]?.extensions?.code, `${eventType}: ${JSON.stringify(r.body)}`).toBe("BAD_USER_INPUT");
      }
    }
  });

  it("a webhook subscribed to one is refused, and nothing is created", async () => {
    const before = await h.db.prisma.webhook.count();
    for (const name of PROTOTYPE_KEYS) {
      const r = await h.gql(`mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { __typename } }`, {
        input: { url: "https://127.0.0.1:9/hook", events: [name] },
      });
      expect(r.status, name).toBeLessThan(500);
      expect(JSON.stringify(r.body), name).not.toContain("INTERNAL_SERVER_ERROR");
      expect(r.body.data?.createWebhook?.__typename ?? r.body.errors?.[0]?.extensions?.code, name).not.toBe("CreateWebhookPayload");
    }
    expect(await h.db.prisma.webhook.count()).toBe(before);
  });
});
