// Strings Postgres text cannot hold (NUL) or UTF-8 cannot carry (an unpaired surrogate) are
// refused at the edge: 400 InvalidRequest on REST, BAD_USER_INPUT (HTTP 400) on GraphQL, and
// the database is left exactly as it was. Before, each of these was a Postgres 22021 and a 500.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { dbSnapshot } from "./support/db-snapshot.ts";

const NUL = "\u0000";
const LONE_HIGH = "\ud800";
const LONE_LOW = "\udfff";

describe.each(backends)("NUL bytes and unpaired surrogates on %s", (backend) => {
  let h: Harness;
  let token: string;
  let webhookId: string;
  beforeAll(async () => {
    h = await startHarness(backend);
    token = (await h.signIn({ email: "nul-owner@example.com" })).token;
    const created = await h.gql(
      `mutation($input: WebhookInput!) { createWebhook(input: $input) { __typename ... on CreateWebhookPayload { webhook { id } } } }`,
      { input: { url: "http://127.0.0.1:9/hook", events: ["user.created"], description: "fixture" } },
    );
    webhookId = created.body.data.createWebhook.webhook.id;
  });
  afterAll(() => h?.close());

  const user = () => ({ authorization: `Bearer ${token}` });
  const secretBearer = () => ({ authorization: `Bearer ${h.apiKey}` });
  const admin = () => ({ "x-admin-token": h.adminToken });

  describe("REST", () => {
    const cases: Array<[string, string, () => Record<string, string>, unknown]> = [
      ["sign-in verify, NUL in state_id", "/auth/otp/verify", () => ({}), { state_id: `otp_${NUL}x`, otp: "123456" }],
      ["sign-in verify, NUL in otp", "/auth/otp/verify", () => ({}), { state_id: "otp_x", otp: `12345${NUL}` }],
      ["sign-in start, unpaired surrogate in email", "/auth/otp/start", () => ({}), { email: `a${LONE_HIGH}@example.com` }],
      ["sign-in start, NUL in phone", "/auth/otp/start", () => ({}), { phone: `+1202555014${NUL}` }],
      ["link verify, NUL in state_id", "/users/link/verify", user, { state_id: `otp_${NUL}x`, otp: "123456" }],
      ["link request, unpaired surrogate in email", "/users/link/request", user, { email: `${LONE_LOW}b@example.com` }],
      ["link remove, NUL in email", "/users/link/remove", user, { email: `nul-owner@example.com${NUL}` }],
      ["rotate-secret, NUL in webhook_id", "/api/v1/webhooks/rotate-secret", secretBearer, { webhook_id: `wh${NUL}` }],
      ["rotate-secret, NUL in a field name", "/api/v1/webhooks/rotate-secret", secretBearer, { [`webhook_id${NUL}`]: "wh" }],
      ["unmerge, NUL nested deep in an unknown field", "/users/link/unmerge", user, { x: [{ y: [`${NUL}`] }] }],
    ];

    it.each(cases)("%s: 400 InvalidRequest, nothing changes", async (_name, route, headers, body) => {
      const before = await dbSnapshot(h.db);
      const r = await h.call("POST", route, { body, headers: headers() });
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body).toMatchObject({ error: "InvalidRequest", message: expect.stringMatching(/NUL character or an unpaired surrogate/) });
      expect(await dbSnapshot(h.db)).toEqual(before);
    });

    it("the message names the field without echoing the raw character", async () => {
      const r = await h.call("POST", "/auth/otp/verify", { body: { state_id: `otp_${NUL}`, otp: "1" } });
      expect(r.body.message).toMatch(/^state_id /);
      expect(r.body.message).not.toContain(NUL);
    });

    it("a well-formed surrogate pair (an emoji) is ordinary input", async () => {
      const r = await h.call("POST", "/auth/otp/verify", { body: { state_id: "otp_\u{1F600}", otp: "123456" } });
      expect(r.status).toBe(400);
      expect(r.body.error).toBe("OTPInvalid");
    });
  });

  describe("GraphQL", () => {
    type Case = {
      /** "query" or "mutation", the selection using $v, and $v's type */
      op: "query" | "mutation";
      body: string;
      type: string;
      value: string | string[];
      headers?: () => Record<string, string>;
      /** the operation also takes $id: ID! (the fixture webhook) */
      withId?: boolean;
    };
    const cases: Array<[string, Case]> = [
      ["webhook(id)", { op: "query", body: `webhook(id: $v) { id }`, type: "ID!", value: `wh${NUL}` }],
      ["redeliverWebhookDelivery", { op: "mutation", body: `redeliverWebhookDelivery(deliveryId: $v) { __typename }`, type: "ID!", value: `dlv${NUL}` }],
      [
        "replayFailedWebhookDeliveries",
        { op: "mutation", body: `replayFailedWebhookDeliveries(webhookId: $v, since: "2024-01-01T00:00:00Z") { __typename }`, type: "ID!", value: `wh${NUL}` },
      ],
      [
        "deliveries(eventType)",
        { op: "query", body: `webhook(id: $id) { deliveries(eventType: $v) { totalCount } }`, type: "String", value: `user.created${NUL}`, withId: true },
      ],
      ["verifyLink", { op: "mutation", body: `verifyLink(stateId: $v, otp: "123456") { __typename }`, type: "String!", value: `otp_${NUL}x`, headers: user }],
      ["completeSignIn", { op: "mutation", body: `completeSignIn(stateId: $v, otp: "123456") { __typename }`, type: "String!", value: `otp_${NUL}x` }],
      [
        "createWebhook(description)",
        {
          op: "mutation",
          body: `createWebhook(input: { url: "http://127.0.0.1:9/x", events: ["user.created"], description: $v }) { __typename }`,
          type: "String",
          value: `d${NUL}`,
        },
      ],
      ["updateProfile(name)", { op: "mutation", body: `updateProfile(name: $v) { __typename }`, type: "String!", value: `Ada${NUL}`, headers: user }],
      ["createProject(name)", { op: "mutation", body: `createProject(name: $v) { __typename }`, type: "String!", value: `acme${NUL}`, headers: admin }],
      ["createApiKey(projectId)", { op: "mutation", body: `createApiKey(projectId: $v) { __typename }`, type: "ID!", value: `prj${NUL}`, headers: admin }],
      ["startSignIn(email), unpaired surrogate", { op: "mutation", body: `startSignIn(email: $v) { __typename }`, type: "String", value: `a${LONE_HIGH}@example.com` }],
      [
        "updateWebhook(input.events), NUL inside a list",
        { op: "mutation", body: `updateWebhook(id: $id, input: { events: $v }) { __typename }`, type: "[String!]", value: ["user.created", `x${NUL}`], withId: true },
      ],
    ];

    const withVariable = (c: Case) => `${c.op}(${[`$v: ${c.type}`, ...(c.withId ? ["$id: ID!"] : [])].join(", ")}) { ${c.body} }`;
    // JSON escapes are GraphQL escapes: "\u0000" and "\ud800" mean the same in both.
    const inline = (c: Case) => `${c.op}${c.withId ? "($id: ID!)" : ""} { ${c.body.replace("$v", JSON.stringify(c.value))} }`;

    const expectRefused = (r: { status: number; body: any }) => {
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.data ?? null).toBeNull();
      expect(r.body.errors).toHaveLength(1);
      expect(r.body.errors[0].extensions.code).toBe("BAD_USER_INPUT");
      expect(r.body.errors[0].message).toMatch(/NUL character or an unpaired surrogate/);
    };

    it.each(cases)("%s in a variable: 400 BAD_USER_INPUT, nothing changes", async (_name, c) => {
      const before = await dbSnapshot(h.db);
      const r = await h.gql(withVariable(c), { v: c.value, ...(c.withId ? { id: webhookId } : {}) }, c.headers?.());
      expectRefused(r);
      expect(r.body.errors[0].message).toMatch(/^variable \$v/);
      expect(await dbSnapshot(h.db)).toEqual(before);
    });

    // graphql-js' lexer already refuses an unpaired surrogate escape in a literal; NUL it lets through.
    const nulCases = cases.filter(([, c]) => JSON.stringify(c.value).includes("\\u0000"));

    it.each(nulCases)("%s as an inline literal: 400 BAD_USER_INPUT, nothing changes", async (_name, c) => {
      const before = await dbSnapshot(h.db);
      const r = await h.gql(inline(c), c.withId ? { id: webhookId } : {}, c.headers?.());
      expectRefused(r);
      expect(await dbSnapshot(h.db)).toEqual(before);
    });

    it("an unpaired surrogate escape in a literal is a parse error, before anything runs", async () => {
      const before = await dbSnapshot(h.db);
      const r = await h.gql(`mutation { startSignIn(email: "a\\ud800@example.com") { __typename } }`);
      expect(r.body.errors[0].extensions.code).toBe("GRAPHQL_PARSE_FAILED");
      expect(r.status).toBeLessThan(500);
      expect(await dbSnapshot(h.db)).toEqual(before);
    });

    it("a NUL in a variable's default value is refused too", async () => {
      const r = await h.gql(`query($v: ID! = "wh\\u0000") { webhook(id: $v) { id } }`);
      expectRefused(r);
    });

    it("the same operation without the bad character runs as before", async () => {
      const r = await h.gql(`query($v: ID!) { webhook(id: $v) { id deliveries(eventType: "user.created") { totalCount } } }`, { v: webhookId });
      expect(r.status).toBe(200);
      expect(r.body.data.webhook.id).toBe(webhookId);
    });
  });
});
