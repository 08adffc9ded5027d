// No cache may keep a token or a secret (docs/security.md): every response that carries one says
// `Cache-Control: no-store`, on REST and GraphQL, while the public keys stay cacheable.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";

const ORIGIN = "http://localhost:4000"; // the harness's default issuer: passkeys are for "localhost"

describe.each(backends)("responses with tokens or secrets on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const app = { "x-api-key": "" };
  const cacheControl = (res: { headers: Headers }) => res.headers.get("cache-control");

  /** A GraphQL call through app.fetch, keeping the response headers (h.gql drops them). */
  async function gql(query: string, variables: Record<string, unknown>, headers: Record<string, string>) {
    const res = await h.app.fetch(
      new Request("http://127.0.0.1:4000/graphql", { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ query, variables }) }),
    );
    return { headers: res.headers, body: await res.json() };
  }

  it("sign-in by code, REST and GraphQL, and re-authentication answer no-store", async () => {
    app["x-api-key"] = h.publishableKey;
    const start = await h.call("POST", "/auth/otp/start", { body: { email: "cache-rest@example.com" }, headers: app });
    const verify = await h.call("POST", "/auth/otp/verify", { body: { state_id: start.body.state_id, otp: await h.mailbox.otp("cache-rest@example.com") }, headers: app });
    expect(verify.body).toHaveProperty("access_token");
    expect(cacheControl(verify)).toBe("no-store");

    const started = await gql(`mutation { startSignIn(email: "cache-gql@example.com") { ... on OtpChallenge { stateId } } }`, {}, app);
    const completed = await gql(
      `mutation($s: String!, $o: String!) { completeSignIn(stateId: $s, otp: $o) { ... on SignInTokens { accessToken } } }`,
      { s: started.body.data.startSignIn.stateId, o: await h.mailbox.otp("cache-gql@example.com") },
      app,
    );
    expect(completed.body.data.completeSignIn.accessToken).toBeTruthy();
    expect(cacheControl(completed)).toBe("no-store");

    const bearer = { ...app, authorization: `Bearer ${verify.body.access_token}` };
    const again = await h.call("POST", "/auth/reauthenticate/start", { body: { email: "cache-rest@example.com" }, headers: bearer });
    const reauth = await h.call("POST", "/auth/reauthenticate/verify", {
      body: { state_id: again.body.state_id, otp: await h.mailbox.otp("cache-rest@example.com") },
      headers: bearer,
    });
    expect(reauth.body).toHaveProperty("access_token");
    expect(cacheControl(reauth)).toBe("no-store");
  });

  it("passkey sign-in answers no-store", async () => {
    const user = await h.signIn({ email: "cache-passkey@example.com" });
    const headers = { authorization: `Bearer ${user.token}`, "x-api-key": h.publishableKey };
    const auth = new SoftAuthenticator(ORIGIN);
    const opts = await h.call("POST", "/auth/passkey/registration/options", { headers });
    expect((await h.call("POST", "/auth/passkey/registration/verify", { body: { response: auth.create(opts.body) }, headers })).status).toBe(200);
    const signOpts = await h.call("POST", "/auth/passkey/sign-in/options", { headers: { "x-api-key": h.publishableKey } });
    const tokens = await h.call("POST", "/auth/passkey/sign-in/verify", { body: { response: auth.get(signOpts.body) }, headers: { "x-api-key": h.publishableKey } });
    expect(tokens.body).toHaveProperty("access_token");
    expect(cacheControl(tokens)).toBe("no-store");
  });

  it("a webhook's secret, on create and on rotation, answers no-store", async () => {
    const created = await gql(
      `mutation { createWebhook(input: { url: "http://127.0.0.1:9/hook", events: ["user.created"] }) { ... on CreateWebhookPayload { webhook { id } secret } } }`,
      {},
      { "x-api-key": h.apiKey },
    );
    expect(created.body.data.createWebhook.secret).toMatch(/^whsec_/);
    expect(cacheControl(created)).toBe("no-store");
    const rotated = await h.call("POST", "/api/v1/webhooks/rotate-secret", {
      body: { webhook_id: created.body.data.createWebhook.webhook.id },
      headers: { authorization: `Bearer ${h.apiKey}` },
    });
    expect(rotated.body.new_secret).toMatch(/^whsec_/);
    expect(cacheControl(rotated)).toBe("no-store");
  });

  it("the public signing keys stay cacheable", async () => {
    expect(cacheControl(await h.call("GET", "/.well-known/jwks.json"))).toBe("public, max-age=300");
  });
});
