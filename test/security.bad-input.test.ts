// No input, however malformed, produces a 500 or changes state.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

const ROUTES = [
  "/auth/otp/start",
  "/auth/otp/verify",
  "/users/link/request",
  "/users/link/verify",
  "/users/link/remove",
  "/users/link/unmerge",
  "/api/v1/webhooks/rotate-secret",
];

describe.each(backends)("bad input on %s", (backend) => {
  let h: Harness;
  let token: string;
  beforeAll(async () => {
    h = await startHarness(backend);
    token = (await h.signIn({ email: "owner@example.com" })).token;
  });
  afterAll(() => h?.close());

  const snapshot = async () => {
    const p = h.db.prisma;
    const [accounts, identifiers, states, events, webhooks, sessions] = await Promise.all([
      p.account.findMany({ orderBy: { id: "asc" } }),
      p.identifier.findMany({ orderBy: { id: "asc" } }),
      p.otpState.count(),
      p.outboxEvent.count(),
      p.webhook.findMany({ orderBy: { id: "asc" } }),
      p.session.findMany({ orderBy: { id: "asc" } }),
    ]);
    return { accounts, identifiers, states, events, webhooks, sessions };
  };
  const auth = () => ({ authorization: `Bearer ${token}` });

  it.each(ROUTES)("%s: malformed JSON is 400 InvalidRequest", async (route) => {
    const r = await h.call("POST", route, { raw: '{"email": ', headers: { "content-type": "application/json", ...auth() } });
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(500);
    expect(r.body).toHaveProperty("error");
    expect(r.body).toHaveProperty("message");
  });

  it("a body over 64 KiB is 413 PayloadTooLarge, on REST and GraphQL", async () => {
    const big = JSON.stringify({ email: "a".repeat(70_000) + "@example.com" });
    const r = await h.call("POST", "/auth/otp/start", { raw: big, headers: { "content-type": "application/json" } });
    expect(r.status).toBe(413);
    expect(r.body.error).toBe("PayloadTooLarge");
    const g = await h.call("POST", "/graphql", { raw: JSON.stringify({ query: `{ __typename }`, pad: "x".repeat(70_000) }), headers: { "content-type": "application/json" } });
    expect(g.status).toBe(413);
  });

  it("a body of only white space counts as {}, with or without a Content-Type (docs/rest.md, Bodies)", async () => {
    // bytes, so that fetch adds no text/plain Content-Type of its own
    const send = async (body: string | null, type?: string) => {
      const headers: Record<string, string> = { "x-api-key": h.apiKey, ...auth(), ...(type ? { "content-type": type } : {}) };
      const init = { method: "POST", headers, body: body === null ? null : new TextEncoder().encode(body) };
      const res = await h.app.fetch(new Request("http://linkgate.test/users/link/unmerge", init));
      return { status: res.status, body: await res.json() };
    };
    const none = await send(null);
    expect(none).toMatchObject({ status: 409, body: { error: "NotMerged" } });
    expect(await send(" \r\n\t", "application/json")).toEqual(none);
    expect(await send(" \r\n\t")).toEqual(none);
  });

  it("a body that is not JSON is 415 with a clear message", async () => {
    const r = await h.call("POST", "/auth/otp/start", { raw: "email=a@example.com", headers: { "content-type": "application/x-www-form-urlencoded" } });
    expect(r.status).toBe(415);
    expect(r.body).toMatchObject({ error: "UnsupportedMediaType" });
  });

  it("wrong types, both identifiers and unknown fields are 400s that change nothing", async () => {
    const before = await snapshot();
    const cases: Array<[string, unknown, string]> = [
      ["/auth/otp/start", { email: 42 }, "InvalidRequest"],
      ["/auth/otp/start", { email: "a@example.com", phone: "+12025550143" }, "InvalidRequest"],
      ["/auth/otp/start", {}, "IdentifierRequired"],
      ["/auth/otp/start", { email: "" }, "IdentifierRequired"],
      ["/auth/otp/start", { email: "not an email" }, "InvalidIdentifier"],
      ["/auth/otp/start", { phone: "2025550143" }, "InvalidIdentifier"],
      ["/auth/otp/start", { email: "a@example.com", admin: true }, "InvalidRequest"],
      ["/auth/otp/start", ["a@example.com"], "InvalidRequest"],
      ["/auth/otp/verify", { state_id: 1, otp: "123456" }, "InvalidRequest"],
      ["/auth/otp/verify", { state_id: "otp_x", otp: "123456" }, "OTPInvalid"],
    ];
    for (const [route, body, error] of cases) {
      const r = await h.call("POST", route, { body });
      expect(r.body.error, `${route} ${JSON.stringify(body)}`).toBe(error);
      expect(r.status).toBe(400);
    }
    expect(await snapshot()).toEqual(before);
  });

  it("random bodies and headers never produce a 500 or a change", async () => {
    const before = await snapshot();
    const value = fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.string(), { maxLength: 3 }), fc.dictionary(fc.string(), fc.string(), { maxKeys: 2 }));
    const body = fc.oneof(
      fc.dictionary(fc.constantFrom("email", "phone", "state_id", "otp", "webhook_id", "x", "__proto__", "constructor"), value, { maxKeys: 3 }).map((o) => JSON.stringify(o)),
      fc.string({ maxLength: 50 }),
      fc.constantFrom("", "null", "[]", "\"x\"", "{", "\u0000", "{\"email\":\"\\ud800@example.com\"}"),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...ROUTES), body, fc.constantFrom("application/json", "text/plain", "application/json; charset=utf-8", ""), fc.boolean(), async (route, raw, type, withToken) => {
        const headers: Record<string, string> = type ? { "content-type": type } : {};
        if (withToken) Object.assign(headers, auth());
        const r = await h.call("POST", route, { raw, headers });
        return r.status >= 400 && r.status < 500 && typeof r.body?.error === "string";
      }),
      { numRuns: 150 },
    );
    const after = await snapshot();
    // Rejected requests may count against rate limits but change no account, identifier, state,
    // event, webhook or session.
    expect(after).toEqual(before);
  });

  it("GraphQL: malformed queries and wrong variable types are 4xx or typed errors, never masked 500s", async () => {
    const bad = await h.call("POST", "/graphql", { raw: "{ nope", headers: { "content-type": "application/json" } });
    expect(bad.status).toBeGreaterThanOrEqual(400);
    expect(bad.status).toBeLessThan(500);
    const wrong = await h.gql(`mutation($e: String) { startSignIn(email: $e) { __typename } }`, { e: 12 });
    expect(wrong.body.errors?.[0]?.message).toBeTruthy();
    expect(wrong.body.errors[0].extensions?.code).not.toBe("INTERNAL_SERVER_ERROR");
  });
});
