// The OpenAPI document (issue 13, item 2): it is valid OpenAPI 3.1, it lists every REST route,
// and every answer the routes give conforms to it. Each documented route is called on its
// happy path and for its documented errors; every body is checked against the document's
// schema for its status (with Ajv, objects closed to undocumented fields), and a status the
// document does not list fails the test. /docs is Swagger UI from this origin only, under the
// dashboard's CSP, checked in Chromium too.
import { Validator } from "@seriousme/openapi-schema-validator";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { Hono } from "hono";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { docsRoutes, DOCS_HEADERS } from "../src/http/routes/docs.ts";
import { PAGE_SECURITY_HEADERS } from "../src/http/static-files.ts";
import { chromiumMissing, launchChromium, listen } from "./support/browser.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { REGISTRATION_OPTIONS_PER_ACCOUNT, SIGN_IN_OPTIONS_PER_ADDRESS } from "../src/auth/passkeys.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { EXTERNAL_FLOWS_PER_ADDRESS } from "../src/auth/external/flows.ts";
import { startUpstreamOidc } from "./support/upstream.ts";

type Doc = { openapi: string; paths: Record<string, Record<string, Operation>>; components: Record<string, unknown> };
type Operation = {
  security?: Array<Record<string, string[]>>;
  requestBody?: { required?: boolean };
  responses: Record<string, { headers?: Record<string, unknown>; content?: Record<string, { schema: unknown }> }>;
};
type Answer = { status: number; body: any; headers: Headers };

const ROUTES = [
  "POST /auth/otp/start",
  "POST /auth/otp/verify",
  "POST /auth/reauthenticate/start",
  "POST /auth/reauthenticate/verify",
  "POST /auth/reauthenticate/passkey",
  "GET /oauth/userinfo",
  "POST /oauth/userinfo",
  "GET /.well-known/jwks.json",
  "GET /.well-known/openid-configuration",
  "POST /users/link/request",
  "POST /users/link/verify",
  "POST /users/link/remove",
  "POST /users/link/unmerge",
  "GET /auth/external/providers",
  "POST /auth/external/start",
  "POST /auth/external/complete",
  "POST /auth/external/confirm",
  "POST /auth/external/confirm/passkey",
  "POST /auth/reauthenticate/external/start",
  "POST /auth/reauthenticate/external/verify",
  "POST /users/link/external/start",
  "POST /users/link/external/verify",
  "POST /auth/passkey/registration/options",
  "POST /auth/passkey/registration/verify",
  "POST /auth/passkey/sign-in/options",
  "POST /auth/passkey/sign-in/verify",
  "GET /auth/passkey/list",
  "POST /auth/passkey/rename",
  "POST /auth/passkey/remove",
  "POST /api/v1/webhooks/rotate-secret",
  "GET /healthz",
  "GET /readyz",
];

/**
 * Documented answers this test does not provoke: a database outage (503, covered by
 * test/ops.db-outage.test.ts) and an account deleted between authentication and the options
 * (a race). Everything else documented must be seen.
 */
const NOT_PROVOKED = (route: string, status: number) => status === 503 || (route === "POST /auth/passkey/registration/options" && status === 404);

const ORIGIN = "http://localhost:4000"; // the harness's default issuer: passkeys are for "localhost"
const DOC_ID = "https://linkgate.test/openapi.json";
const docsApp = new Hono().route("/", docsRoutes());

async function servedDocument(fetch: (req: Request) => Response | Promise<Response> = docsApp.fetch): Promise<Doc> {
  const res = await fetch(new Request("http://linkgate.test/openapi.json"));
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  return (await res.json()) as Doc;
}

const operations = (doc: Doc) =>
  Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ route: `${method.toUpperCase()} ${path}`, method, path, op })));

/** The document with every object schema closed: a field the server sends must be documented. */
function closed<T>(value: T): T {
  if (Array.isArray(value)) return value.map(closed) as T;
  if (typeof value !== "object" || value === null) return value;
  const out: Record<string, unknown> = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, closed(v)]));
  if (out.type === "object" && out.properties && !("additionalProperties" in out)) out.additionalProperties = false;
  return out as T;
}

const pointer = (...parts: string[]) => parts.map((p) => p.replace(/~/g, "~0").replace(/\//g, "~1")).join("/");

function responseValidator(doc: Doc) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  // ajv-formats is CommonJS; its function is also its own `default`, which is what TypeScript sees.
  addFormats.default(ajv);
  ajv.addSchema(closed(doc), DOC_ID);
  const compiled = new Map<string, ValidateFunction>();
  return (method: string, path: string, status: number) => {
    const ref = `${DOC_ID}#/${pointer("paths", path, method, "responses", String(status), "content", "application/json", "schema")}`;
    const v = compiled.get(ref) ?? ajv.compile({ $ref: ref });
    compiled.set(ref, v);
    return { validate: v, errors: () => ajv.errorsText(v.errors) };
  };
}

describe("the OpenAPI document", () => {
  let doc: Doc;
  beforeAll(async () => {
    doc = await servedDocument();
  });

  it("validates as OpenAPI 3.1 with @seriousme/openapi-schema-validator", async () => {
    const validator = new Validator();
    const result = await validator.validate(doc as never);
    expect(result.errors, JSON.stringify(result.errors, null, 2)).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
    expect(doc.openapi).toMatch(/^3\.1\./);
  });

  it("lists every REST route, and nothing else", () => {
    expect(operations(doc).map((o) => o.route).sort()).toEqual([...ROUTES].sort());
  });

  it("every route says who may call it and documents the errors of its credentials and its body", () => {
    const schemes = doc.components.securitySchemes as Record<string, { type: string; in?: string; name?: string; scheme?: string }>;
    expect(schemes.ApiKey).toMatchObject({ type: "apiKey", in: "header", name: "X-API-Key" });
    expect(schemes.AccessToken).toMatchObject({ type: "http", scheme: "bearer" });
    expect(schemes.SecretKeyBearer).toMatchObject({ type: "http", scheme: "bearer" });
    for (const { route, op } of operations(doc)) {
      expect(op.responses["200"], route).toBeDefined();
      if (op.security?.length) expect(op.responses["401"], `${route} documents 401`).toBeDefined();
      if (op.requestBody) for (const s of ["400", "413", "415"]) expect(op.responses[s], `${route} documents ${s}`).toBeDefined();
      for (const [status, res] of Object.entries(op.responses)) {
        if (Number(status) >= 400 && route !== "GET /readyz") {
          const schema = res.content?.["application/json"]?.schema as { properties?: { error?: { enum?: string[] } } };
          expect(schema?.properties?.error?.enum?.length, `${route} ${status} names its errors`).toBeGreaterThan(0);
        }
      }
    }
    const security = (route: string) => operations(doc).find((o) => o.route === route)!.op.security;
    expect(security("POST /users/link/request")).toEqual([{ ApiKey: [], AccessToken: [] }]);
    expect(security("POST /auth/otp/start")).toEqual([{ ApiKey: [] }]);
    expect(security("GET /oauth/userinfo")).toEqual([{ AccessToken: [] }]);
    expect(security("POST /api/v1/webhooks/rotate-secret")).toEqual([{ SecretKeyBearer: [] }, { ApiKey: [] }]);
  });
});

describe.each(backends)("every REST answer conforms to the document on %s", (backend) => {
  let h: Harness;
  let doc: Doc;
  let schemaFor: ReturnType<typeof responseValidator>;
  let otherProjectKey: string;
  const seen = new Map<string, Set<number>>();

  beforeAll(async () => {
    // Low ceilings, so a 429 takes a few requests; every scenario below uses its own identifiers.
    h = await startHarness(backend, {
      limits: {
        sendsPerIdentifier: { max: 3, windowSeconds: 600 },
        failuresPerSubject: { max: 3, windowSeconds: 3600 },
        failuresPerIdentifier: { max: 3, windowSeconds: 3600 },
      },
    });
    doc = await servedDocument((req) => h.app.fetch(req));
    schemaFor = responseValidator(doc);
    const other = await h.gql(`mutation { createProject(name: "openapi-other") { ... on CreateProjectPayload { secretKey } } }`, {}, { "x-admin-token": h.adminToken });
    otherProjectKey = other.body.data.createProject.secretKey;
  });
  afterAll(() => h?.close());

  /** Checks one answer against the document: its status is listed, its body and headers conform. */
  function conforms(method: string, path: string, res: Answer) {
    const route = `${method} ${path}`;
    const op = doc.paths[path]?.[method.toLowerCase()];
    if (!op) throw new Error(`${route} is not documented`);
    const documented = op.responses[String(res.status)];
    expect(documented, `${route} answered ${res.status}, which the document does not list: ${JSON.stringify(res.body)}`).toBeDefined();
    expect(res.headers.get("content-type"), route).toMatch(/^application\/json/);
    const { validate, errors } = schemaFor(method.toLowerCase(), path, res.status);
    expect(validate(res.body), `${route} ${res.status}: ${errors()} in ${JSON.stringify(res.body)}`).toBe(true);
    for (const header of Object.keys(documented.headers ?? {})) expect(res.headers.get(header), `${route} ${res.status} sends ${header}`).toBeTruthy();
    if (!seen.has(route)) seen.set(route, new Set());
    seen.get(route)!.add(res.status);
  }

  async function send(method: "GET" | "POST", path: string, opts: { headers?: Record<string, string>; json?: unknown; raw?: string; from?: string } = {}): Promise<Answer> {
    const headers: Record<string, string> = { ...opts.headers };
    let body = opts.raw;
    if (opts.json !== undefined) {
      body = JSON.stringify(opts.json);
      headers["content-type"] ??= "application/json";
    }
    const env = opts.from ? { incoming: { socket: { remoteAddress: opts.from } } } : undefined;
    const res = await h.app.fetch(new Request(`http://linkgate.test${path}`, { method, headers, body }), env);
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {}
    const answer = { status: res.status, body: parsed, headers: res.headers };
    conforms(method, path, answer);
    return answer;
  }
  const post = (path: string, json: unknown, headers: Record<string, string>) => send("POST", path, { json, headers });

  const key = (k = h.apiKey) => ({ "x-api-key": k });
  const as = (token: string, k = h.apiKey) => ({ "x-api-key": k, authorization: `Bearer ${token}` });
  const wrong = (code: string) => String((Number(code) + 1) % 1_000_000).padStart(6, "0");

  async function signIn(email: string) {
    const start = await post("/auth/otp/start", { email }, key(h.publishableKey));
    expect(start.status).toBe(200);
    const verify = await post("/auth/otp/verify", { state_id: start.body.state_id, otp: await h.mailbox.otp(email) }, key(h.publishableKey));
    expect(verify.status).toBe(200);
    return { token: verify.body.access_token as string, accountId: verify.body.account_id as string };
  }

  /** Link an identifier to the signed-in user: request and verify with the code sent. */
  async function link(token: string, email: string) {
    const req = await post("/users/link/request", { email }, as(token));
    expect(req.status, JSON.stringify(req.body)).toBe(200);
    return post("/users/link/verify", { state_id: req.body.state_id, otp: await h.mailbox.otp(email) }, as(token));
  }

  /** Sends until the limit answers; a bounded number of tries, never a wait. */
  async function untilLimited(attempt: () => Promise<Answer>, tries = 6): Promise<Answer> {
    for (let i = 0; i < tries; i++) {
      const r = await attempt();
      if (r.status === 429) return r;
    }
    throw new Error(`no 429 after ${tries} tries`);
  }

  it("the app serves the document and the reference page", async () => {
    expect(doc).toEqual(await servedDocument());
    const page = await h.app.fetch(new Request("http://linkgate.test/docs"));
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toBe(DOCS_HEADERS["content-security-policy"]);
  });

  it("sign-in by code: happy path, bad identifiers, wrong code, too many sends", async () => {
    const start = await post("/auth/otp/start", { email: "reader@example.com" }, key());
    expect(start.status).toBe(200);
    const code = await h.mailbox.otp("reader@example.com");
    expect((await post("/auth/otp/verify", { state_id: start.body.state_id, otp: wrong(code) }, key())).body.error).toBe("OTPInvalid");
    const verify = await post("/auth/otp/verify", { state_id: start.body.state_id, otp: code }, key());
    expect(verify.body).toMatchObject({ token_type: "Bearer" });

    expect((await post("/auth/otp/start", {}, key())).body.error).toBe("IdentifierRequired");
    expect((await post("/auth/otp/start", { email: "not an address" }, key())).body.error).toBe("InvalidIdentifier");
    expect((await post("/auth/otp/start", { email: "a@example.com", phone: "+15551234567" }, key())).body.error).toBe("InvalidRequest");
    const limited = await untilLimited(() => post("/auth/otp/start", { phone: "+12025550199" }, key()));
    expect(limited.body.error).toBe("RateLimited");

    // wrong codes for one identifier: past its limit even a guess is refused before it is judged
    const guessed = await post("/auth/otp/start", { email: "sign-in-guessed@example.com" }, key());
    const right = await h.mailbox.otp("sign-in-guessed@example.com");
    const refused = await untilLimited(() => post("/auth/otp/verify", { state_id: guessed.body.state_id, otp: wrong(right) }, key()));
    expect(refused.body.error).toBe("RateLimited");
  });

  it("userinfo, keys and discovery", async () => {
    const { token, accountId } = await signIn("claims@example.com");
    for (const method of ["GET", "POST"] as const) {
      expect((await send(method, "/oauth/userinfo", { headers: { authorization: `Bearer ${token}` } })).body).toMatchObject({ sub: accountId, email: "claims@example.com" });
      expect((await send(method, "/oauth/userinfo")).status).toBe(401);
    }
    expect((await send("GET", "/.well-known/jwks.json")).body.keys.length).toBeGreaterThan(0);
    expect((await send("GET", "/.well-known/openid-configuration")).body.jwks_uri).toMatch(/\/\.well-known\/jwks\.json$/);
    expect((await send("GET", "/healthz")).body).toEqual({ status: "ok" });
    expect((await send("GET", "/readyz")).body.status).toBe("ready");
  });

  it("every route with credentials answers 401 without them, and Forbidden for a token of another project", async () => {
    const { token } = await signIn("crossed@example.com");
    for (const { route, method, path, op } of operations(doc)) {
      if (!op.security?.length) continue;
      const m = method.toUpperCase() as "GET" | "POST";
      const json = m === "POST" ? {} : undefined;
      const none = await send(m, path, { json });
      expect(none.body.error, route).toBe("Unauthenticated");
      expect(none.headers.get("www-authenticate")).toBe('Bearer realm="linkgate"');
      if (op.security.some((s) => "AccessToken" in s && "ApiKey" in s)) {
        const crossed = await send(m, path, { json, headers: as(token, otherProjectKey) });
        expect(crossed.body.error, route).toBe("Forbidden");
      }
    }
  });

  it("every route with a body refuses an unknown field (400), another media type (415) and more than 64 KiB (413)", async () => {
    const { token } = await signIn("strict-bodies@example.com");
    for (const { route, method, path, op } of operations(doc)) {
      if (!op.requestBody) continue;
      const m = method.toUpperCase() as "POST";
      const headers = op.security?.some((s) => "SecretKeyBearer" in s) ? { authorization: `Bearer ${h.apiKey}` } : as(token);
      const unknown = await send(m, path, { json: { surprise: 1 }, headers });
      expect(unknown.body, route).toMatchObject({ error: "InvalidRequest", message: expect.stringContaining("surprise") });
      const form = await send(m, path, { raw: "a=1", headers: { ...headers, "content-type": "application/x-www-form-urlencoded" } });
      expect(form.body.error, route).toBe("UnsupportedMediaType");
      const big = await send(m, path, { raw: JSON.stringify({ pad: "x".repeat(70_000) }), headers: { ...headers, "content-type": "application/json" } });
      expect(big.body.error, route).toBe("PayloadTooLarge");
      const nul = await send(m, path, { raw: '{"\\u0000": 1}', headers: { ...headers, "content-type": "application/json" } });
      expect(nul.body.error, route).toBe("InvalidRequest");
    }
  });

  it("re-authentication by code and by passkey; an identifier not on the account; wrong codes until 429", async () => {
    const { token } = await signIn("again@example.com");
    const start = await post("/auth/reauthenticate/start", { email: "again@example.com" }, as(token));
    expect(start.status).toBe(200);
    const verify = await post("/auth/reauthenticate/verify", { state_id: start.body.state_id, otp: await h.mailbox.otp("again@example.com") }, as(token));
    expect(decodeJwt(verify.body.access_token).sid).toBe(decodeJwt(token).sid);
    expect((await post("/auth/reauthenticate/start", { email: "someone-else@example.com" }, as(token))).body.error).toBe("IdentifierNotLinked");
    expect((await post("/auth/reauthenticate/start", { email: "" }, as(token))).body.error).toBe("IdentifierRequired");
    expect((await post("/auth/reauthenticate/verify", { state_id: 7, otp: "123456" }, as(token))).body.error).toBe("InvalidRequest");
    // the limit on sends to one identifier (3, the sign-in's included)
    expect((await untilLimited(() => post("/auth/reauthenticate/start", { email: "again@example.com" }, as(token)))).body.error).toBe("RateLimited");

    const guesser = await signIn("guesser@example.com");
    const state = await post("/auth/reauthenticate/start", { email: "guesser@example.com" }, as(guesser.token));
    const code = await h.mailbox.otp("guesser@example.com");
    const limited = await untilLimited(() => post("/auth/reauthenticate/verify", { state_id: state.body.state_id, otp: wrong(code) }, as(guesser.token)));
    expect(limited.body.error).toBe("RateLimited");
  });

  it("passkeys: register, sign in, re-authenticate, list, rename, remove, and their errors", async () => {
    const { token, accountId } = await signIn("passkeys@example.com");
    const auth = new SoftAuthenticator(ORIGIN);
    const options = await post("/auth/passkey/registration/options", undefined, as(token, h.publishableKey));
    expect(options.status).toBe(200);
    const created = await post("/auth/passkey/registration/verify", { response: auth.create(options.body), name: "Laptop" }, as(token));
    expect(created.body.passkey).toMatchObject({ name: "Laptop", last_used_at: null });
    const id = created.body.passkey.id as string;
    expect((await post("/auth/passkey/registration/verify", { response: {} }, as(token))).body.error).toBe("PasskeyInvalid");

    const signInOptions = await post("/auth/passkey/sign-in/options", {}, key(h.publishableKey));
    const signedIn = await post("/auth/passkey/sign-in/verify", { response: auth.get(signInOptions.body) }, key(h.publishableKey));
    expect(signedIn.body.account_id).toBe(accountId);
    expect((await post("/auth/passkey/sign-in/verify", { response: { id: "x" } }, key())).body.error).toBe("PasskeyInvalid");

    const again = await post("/auth/passkey/sign-in/options", undefined, key());
    expect((await post("/auth/reauthenticate/passkey", { response: auth.get(again.body) }, as(token))).status).toBe(200);
    expect((await post("/auth/reauthenticate/passkey", { response: "forged" }, as(token))).body.error).toBe("PasskeyInvalid");

    expect((await send("GET", "/auth/passkey/list", { headers: as(token) })).body.passkeys).toHaveLength(1);
    expect((await post("/auth/passkey/rename", { id, name: "Work laptop" }, as(token))).body.passkey).toMatchObject({ id, name: "Work laptop", last_used_at: expect.any(String) });
    expect((await post("/auth/passkey/rename", { id: "psk_nope", name: "x" }, as(token))).body.error).toBe("NotFound");
    expect((await post("/auth/passkey/rename", { id, name: "" }, as(token))).body.error).toBe("InvalidRequest");
    expect((await post("/auth/passkey/remove", { id }, as(token))).body).toEqual({ removed_id: id });
    expect((await post("/auth/passkey/remove", { id }, as(token))).body.error).toBe("NotFound");
  });

  it("linking: attach, merge, unmerge, remove and every conflict", async () => {
    const a = await signIn("linker@example.com");
    expect((await post("/users/link/request", { email: "LINKER@example.com" }, as(a.token))).body.error).toBe("CannotLinkSelf");
    expect((await post("/users/link/request", { phone: "555" }, as(a.token))).body.error).toBe("InvalidIdentifier");

    const req = await post("/users/link/request", { email: "linker-work@example.com" }, as(a.token));
    const code = await h.mailbox.otp("linker-work@example.com");
    expect((await post("/users/link/verify", { state_id: req.body.state_id, otp: wrong(code) }, as(a.token))).body.error).toBe("OTPInvalid");
    expect((await post("/users/link/verify", { state_id: req.body.state_id, otp: code }, as(a.token))).body).toEqual({ message: "Account linked successfully", outcome: "attached" });

    await signIn("merged-away@example.com");
    expect((await link(a.token, "merged-away@example.com")).body.outcome).toBe("merged");
    const third = await signIn("third@example.com");
    expect((await link(third.token, "merged-away@example.com")).body.error).toBe("TargetAlreadyLinked");
    expect((await link(third.token, "linker-work@example.com")).body.error).toBe("TargetSecondaryIdentity");
    await signIn("fourth@example.com");
    expect((await link(a.token, "fourth@example.com")).body.error).toBe("AlreadyLinked");

    expect((await post("/users/link/unmerge", undefined, as(a.token))).body).toEqual({ message: "Accounts unmerged successfully" });
    expect((await post("/users/link/unmerge", {}, as(a.token))).body.error).toBe("NotMerged");
    expect((await post("/users/link/remove", { email: "linker-work@example.com" }, as(a.token))).body).toEqual({ message: "Account unlinked successfully" });
    expect((await post("/users/link/remove", { email: "nobody@example.com" }, as(a.token))).body.error).toBe("IdentifierNotLinked");
    expect((await post("/users/link/remove", { email: "third@example.com" }, as(third.token))).body.error).toBe("LastIdentifier");

    expect((await untilLimited(() => post("/users/link/request", { email: "flooded@example.com" }, as(a.token)))).body.error).toBe("RateLimited");
    const guesser = await signIn("link-guesser@example.com");
    const state = await post("/users/link/request", { email: "guessed@example.com" }, as(guesser.token));
    const right = await h.mailbox.otp("guessed@example.com");
    const limited = await untilLimited(() => post("/users/link/verify", { state_id: state.body.state_id, otp: wrong(right) }, as(guesser.token)));
    expect(limited.body.error).toBe("RateLimited");
  });

  it("a session that signed in too long ago is refused every sensitive change with ReauthenticationRequired", async () => {
    const { token } = await signIn("stale@example.com");
    // An old sign-in, without waiting for one: the session's row says when it authenticated.
    await h.db.prisma.session.update({ where: { id: decodeJwt(token).sid as string }, data: { authTime: new Date(Date.now() - 24 * 3600_000) } });
    const refused = [
      await post("/users/link/request", { email: "stale-new@example.com" }, as(token)),
      await post("/users/link/remove", { email: "stale@example.com" }, as(token)),
      await post("/users/link/unmerge", {}, as(token)),
      await post("/auth/passkey/registration/options", {}, as(token)),
      await post("/auth/passkey/remove", { id: "psk_any" }, as(token)),
    ];
    for (const r of refused) expect(r.body.error).toBe("ReauthenticationRequired");
  });

  it("rotate-secret: the secret key rotates; a publishable key, an unknown webhook and a bad id are refused", async () => {
    const created = await h.gql(
      `mutation { createWebhook(input: { url: "https://127.0.0.1:9/hook", events: ["user.created"], description: "openapi" }) { ... on CreateWebhookPayload { webhook { id } } } }`,
    );
    const webhookId = created.body.data.createWebhook.webhook.id as string;
    const rotated = await post("/api/v1/webhooks/rotate-secret", { webhook_id: webhookId }, { authorization: `Bearer ${h.apiKey}` });
    expect(rotated.body).toMatchObject({ success: true, webhook_id: webhookId, new_secret: expect.stringMatching(/^whsec_/) });
    const publishable = await post("/api/v1/webhooks/rotate-secret", { webhook_id: webhookId }, { authorization: `Bearer ${h.publishableKey}` });
    expect(publishable.body.error).toBe("SecretKeyRequired");
    const unknown = await post("/api/v1/webhooks/rotate-secret", { webhook_id: "wh_nope" }, { authorization: `Bearer ${h.apiKey}` });
    expect(unknown.body.error).toBe("WebhookNotFound");
    const badType = await post("/api/v1/webhooks/rotate-secret", { webhook_id: 5 }, { authorization: `Bearer ${h.apiKey}` });
    expect(badType.body.error).toBe("InvalidRequest");
    // the key in X-API-Key, as every other route takes it, works too
    const asElsewhere = await post("/api/v1/webhooks/rotate-secret", { webhook_id: webhookId }, { "x-api-key": h.apiKey });
    expect(asElsewhere.body).toMatchObject({ success: true, webhook_id: webhookId, new_secret: expect.stringMatching(/^whsec_/) });
    const none = await post("/api/v1/webhooks/rotate-secret", { webhook_id: webhookId }, {});
    expect(none.status).toBe(401);
    expect(none.body.message).toMatch(/Authorization: Bearer/);
  });

  it("passkey sign-in options: one client address past its bound is 429 RateLimited with Retry-After", async () => {
    let refused: Awaited<ReturnType<typeof post>> | undefined;
    for (let i = 0; i <= SIGN_IN_OPTIONS_PER_ADDRESS.max && !refused; i++) {
      const r = await post("/auth/passkey/sign-in/options", undefined, key(h.publishableKey));
      if (r.status !== 200) refused = r;
    }
    expect(refused?.status).toBe(429);
    expect(refused?.body.error).toBe("RateLimited");
    expect(Number(refused?.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("passkey registration options: one account past its bound is 429 RateLimited with Retry-After", async () => {
    const { token } = await signIn("registers-often@example.com");
    let refused: Awaited<ReturnType<typeof post>> | undefined;
    for (let i = 0; i <= REGISTRATION_OPTIONS_PER_ACCOUNT.max && !refused; i++) {
      const r = await post("/auth/passkey/registration/options", undefined, as(token, h.publishableKey));
      if (r.status !== 200) refused = r;
    }
    expect(refused?.status).toBe(429);
    expect(refused?.body.error).toBe("RateLimited");
    expect(Number(refused?.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("external identities: providers, sign-in, the e-mail proof, linking, against a real upstream, and every error", async () => {
    const up = await startUpstreamOidc();
    try {
      const addProvider = async (slug: string) => {
        const input = { preset: "OIDC", slug, displayName: `Upstream ${slug}`, issuer: up.issuer, clientId: up.clientId, clientSecret: up.clientSecret, scopes: ["openid", "email", "profile"] };
        const created = await h.gql(`mutation($input: IdentityProviderInput!) { createIdentityProvider(input: $input) { __typename ... on IdentityProvider { id callbackUrl } } }`, { input });
        const { id } = created.body.data.createIdentityProvider;
        expect(created.body.data.createIdentityProvider).toEqual({ __typename: "IdentityProvider", id, callbackUrl: `${ORIGIN}/auth/external/${id}/callback` });
        up.addRedirectUri(created.body.data.createIdentityProvider.callbackUrl);
      };
      await addProvider("upstream");
      const login = `${ORIGIN}/login?interaction=x1`; // the hosted page is always a place to return to
      /** The browser's trip: the upstream signs `sub` in, linkgate's callback sends it back with a code. */
      const trip = async (authorizationUrl: string, user: { sub: string; email?: string; email_verified?: boolean }) => {
        up.loginAs(user);
        const callback = await up.followAuthorization(authorizationUrl);
        const res = await h.app.fetch(new Request(`http://linkgate.test${callback.pathname}${callback.search}`));
        expect(res.status).toBe(303);
        const back = new URL(res.headers.get("location")!);
        expect(back.searchParams.get("error"), back.href).toBeNull();
        return back.searchParams.get("code")!;
      };
      const signInWith = async (user: { sub: string; email?: string; email_verified?: boolean }, from?: string) => {
        const started = await post("/auth/external/start", { provider: "upstream", redirect_uri: login }, key(h.publishableKey));
        expect(started.status, JSON.stringify(started.body)).toBe(200);
        const code = await trip(started.body.authorization_url, user);
        const completed = await send("POST", "/auth/external/complete", { json: { state_id: started.body.state_id, code }, headers: key(h.publishableKey), from });
        return { ...completed, code, stateId: started.body.state_id as string };
      };
      const linkWith = async (token: string, user: { sub: string; email?: string; email_verified?: boolean }) => {
        const started = await post("/users/link/external/start", { provider: "upstream", redirect_uri: login }, as(token));
        expect(started.status, JSON.stringify(started.body)).toBe(200);
        const code = await trip(started.body.authorization_url, user);
        return post("/users/link/external/verify", { state_id: started.body.state_id, code }, as(token));
      };

      expect((await send("GET", "/auth/external/providers", { headers: key(h.publishableKey) })).body.providers).toEqual([
        { slug: "upstream", display_name: "Upstream upstream", preset: "oidc" },
      ]);

      // start: unknown provider, a redirect_uri the project never registered, a first-party client's
      expect((await post("/auth/external/start", { provider: "nope", redirect_uri: login }, key())).body.error).toBe("ProviderNotFound");
      expect((await post("/auth/external/start", { provider: "upstream", redirect_uri: "https://evil.example/cb" }, key())).body.error).toBe("InvalidRedirectUri");
      const app = "https://app.example/auth/callback";
      const client = await h.gql(`mutation($input: OAuthClientInput!) { createOAuthClient(input: $input) { __typename } }`, {
        input: { name: "First party", redirectUris: [app], type: "PUBLIC", firstParty: true },
      });
      expect(client.body.data.createOAuthClient.__typename).toBe("OAuthClientWithSecret");
      expect((await post("/auth/external/start", { provider: "upstream", redirect_uri: app }, key())).status).toBe(200);

      // complete: a new identity creates an account, the same one signs into it again
      const first = await signInWith({ sub: "oa-new", email: "oa-new@example.com", email_verified: true });
      expect(first.body).toMatchObject({ token_type: "Bearer" });
      expect(decodeJwt(first.body.id_token).amr).toEqual(["fed"]);
      const again = await signInWith({ sub: "oa-new", email: "oa-new@example.com", email_verified: true });
      expect(again.body.account_id).toBe(first.body.account_id);
      // a wrong code, and a code with another flow's state
      expect((await post("/auth/external/complete", { state_id: again.stateId, code: "wrong" }, key())).body.error).toBe("OTPInvalid");
      expect((await post("/auth/external/complete", { state_id: "xfl_nope", code: again.code }, key())).body.error).toBe("OTPInvalid");
      expect((await post("/auth/external/complete", { state_id: 7, code: again.code }, key())).body.error).toBe("InvalidRequest");

      // the provider asserts a verified e-mail an account holds: a code to that e-mail first
      const holder = await signIn("oa-holder@example.com");
      const collided = await signInWith({ sub: "oa-claims-holder", email: "oa-holder@example.com", email_verified: true });
      expect(collided.body).toEqual({ verification_required: "email", state_id: expect.any(String), destination: expect.stringContaining("@example.com") });
      const otp = await h.mailbox.otp("oa-holder@example.com");
      expect((await post("/auth/external/confirm", { state_id: collided.body.state_id, otp: wrong(otp) }, key())).body.error).toBe("OTPInvalid");
      const confirmed = await post("/auth/external/confirm", { state_id: collided.body.state_id, otp }, key());
      expect(confirmed.body.account_id).toBe(holder.accountId);
      // ...or a passkey of that account proves it instead of the code
      const keyed = await signIn("oa-passkey@example.com");
      const device = new SoftAuthenticator(ORIGIN);
      const registration = await post("/auth/passkey/registration/options", undefined, as(keyed.token, h.publishableKey));
      expect((await post("/auth/passkey/registration/verify", { response: device.create(registration.body), name: "Laptop" }, as(keyed.token))).status).toBe(200);
      // from an address of its own: an earlier case spent the default address's sign-in options
      const assertion = async () => device.get((await send("POST", "/auth/passkey/sign-in/options", { json: {}, headers: key(), from: "203.0.113.44" })).body);
      const viaPasskey = await signInWith({ sub: "oa-claims-passkey", email: "oa-passkey@example.com", email_verified: true });
      expect((await post("/auth/external/confirm/passkey", { state_id: 7, response: await assertion() }, key())).body.error).toBe("InvalidRequest");
      expect((await post("/auth/external/confirm/passkey", { state_id: "otp_nope", response: await assertion() }, key())).body.error).toBe("OTPInvalid");
      expect((await post("/auth/external/confirm/passkey", { state_id: viaPasskey.body.state_id, response: {} }, key())).body.error).toBe("PasskeyInvalid");
      const byPasskey = await post("/auth/external/confirm/passkey", { state_id: viaPasskey.body.state_id, response: await assertion() }, key());
      expect(byPasskey.body.account_id).toBe(keyed.accountId);
      // codes sent to that e-mail are bounded (3 here, the sign-in's and the first proof's included)
      const flooded = await untilLimited(async () => (await signInWith({ sub: `oa-flood-${Math.random()}`, email: "oa-holder@example.com", email_verified: true })) as Answer);
      expect(flooded.body.error).toBe("RateLimited");
      // wrong codes for the e-mail to prove are bounded too (from an address it never signed in from)
      await signIn("oa-guessed@example.com");
      const stranger = "198.51.100.9";
      const guessed = await signInWith({ sub: "oa-guesser", email: "oa-guessed@example.com", email_verified: true }, stranger);
      const right = await h.mailbox.otp("oa-guessed@example.com");
      const refused = await untilLimited(() =>
        send("POST", "/auth/external/confirm", { json: { state_id: guessed.body.state_id, otp: wrong(right) }, headers: key(), from: stranger }),
      );
      expect(refused.body.error).toBe("RateLimited");

      // linking: attach, then each refusal of verify's decision table
      const linker = await signIn("oa-linker@example.com");
      expect((await linkWith(linker.token, { sub: "oa-linked" })).body).toEqual({ message: "Account linked successfully", outcome: "attached" });
      expect((await linkWith(linker.token, { sub: "oa-linked" })).body.error).toBe("CannotLinkSelf");
      const other = await signIn("oa-other@example.com");
      expect((await linkWith(other.token, { sub: "oa-linked" })).body.error).toBe("TargetSecondaryIdentity");
      expect((await linkWith(linker.token, { sub: "oa-new" })).body.outcome).toBe("merged");
      expect((await linkWith(other.token, { sub: "oa-new" })).body.error).toBe("TargetAlreadyLinked");
      const another = await signInWith({ sub: "oa-another" });
      expect(another.status).toBe(200);
      expect((await linkWith(linker.token, { sub: "oa-another" })).body.error).toBe("AlreadyLinked");
      expect((await post("/users/link/external/start", { provider: "nope", redirect_uri: login }, as(other.token))).body.error).toBe("ProviderNotFound");
      expect((await post("/users/link/external/start", { provider: "upstream", redirect_uri: "https://evil.example/cb" }, as(other.token))).body.error).toBe("InvalidRedirectUri");
      const pending = await post("/users/link/external/start", { provider: "upstream", redirect_uri: login }, as(other.token));
      expect((await post("/users/link/external/verify", { state_id: pending.body.state_id, code: "never-sent" }, as(other.token))).body.error).toBe("OTPInvalid");
      // an account past its wrong codes (of any link) is refused before the decision
      const guesser = await signIn("oa-link-guesser@example.com");
      const state = await post("/users/link/request", { email: "oa-link-guessed@example.com" }, as(guesser.token));
      const sent = await h.mailbox.otp("oa-link-guessed@example.com");
      await untilLimited(() => post("/users/link/verify", { state_id: state.body.state_id, otp: wrong(sent) }, as(guesser.token)));
      expect((await linkWith(guesser.token, { sub: "oa-guesser-link" })).body.error).toBe("RateLimited");
      // a session that signed in too long ago must re-authenticate first
      await h.db.prisma.session.update({ where: { id: decodeJwt(other.token).sid as string }, data: { authTime: new Date(Date.now() - 24 * 3600_000) } });
      expect((await post("/users/link/external/start", { provider: "upstream", redirect_uri: login }, as(other.token))).body.error).toBe("ReauthenticationRequired");
      // ...which an account re-authenticates through the provider of one of its own external sign-ins
      const reauthWith = async (token: string, user: { sub: string }) => {
        const started = await post("/auth/reauthenticate/external/start", { provider: "upstream", redirect_uri: login }, as(token));
        expect(started.status, JSON.stringify(started.body)).toBe(200);
        const code = await trip(started.body.authorization_url, user);
        return post("/auth/reauthenticate/external/verify", { state_id: started.body.state_id, code }, as(token));
      };
      expect((await post("/auth/reauthenticate/external/start", { provider: "nope", redirect_uri: login }, as(other.token))).body.error).toBe("ProviderNotFound");
      expect((await reauthWith(other.token, { sub: "oa-not-others" })).body.error).toBe("ExternalSignInFailed");
      expect((await post("/auth/reauthenticate/external/verify", { state_id: "xfl_nope", code: "x" }, as(other.token))).body.error).toBe("OTPInvalid");
      await h.db.prisma.session.update({ where: { id: decodeJwt(linker.token).sid as string }, data: { authTime: new Date(Date.now() - 24 * 3600_000) } });
      const reauthenticated = await reauthWith(linker.token, { sub: "oa-linked" });
      expect(decodeJwt(reauthenticated.body.id_token)).toMatchObject({ sid: decodeJwt(linker.token).sid, amr: ["fed"] });
      expect((await linkWith(linker.token, { sub: "oa-after-reauth" })).body.outcome).toBe("attached");

      // the upstream down: a provider never used yet must discover it, and cannot
      await addProvider("unreached");
      await up.down();
      expect((await post("/auth/external/start", { provider: "unreached", redirect_uri: login }, key())).body.error).toBe("UpstreamUnavailable");
      expect((await post("/users/link/external/start", { provider: "unreached", redirect_uri: login }, as(linker.token))).body.error).toBe("UpstreamUnavailable");
      expect((await post("/auth/reauthenticate/external/start", { provider: "unreached", redirect_uri: login }, as(linker.token))).body.error).toBe("UpstreamUnavailable");
      await up.up();

      // starts store state: one client address gets a bounded number
      const from = "203.0.113.27";
      let limited: Answer | undefined;
      for (let i = 0; i <= EXTERNAL_FLOWS_PER_ADDRESS.max && !limited; i++) {
        const r = await send("POST", "/auth/external/start", { json: { provider: "upstream", redirect_uri: login }, headers: key(h.publishableKey), from });
        if (r.status !== 200) limited = r;
      }
      expect(limited?.body.error).toBe("RateLimited");
      const linkLimited = await send("POST", "/users/link/external/start", { json: { provider: "upstream", redirect_uri: login }, headers: as(linker.token), from });
      expect(linkLimited.body.error).toBe("RateLimited");
      const reauthLimited = await send("POST", "/auth/reauthenticate/external/start", { json: { provider: "upstream", redirect_uri: login }, headers: as(linker.token), from });
      expect(reauthLimited.body.error).toBe("RateLimited");
    } finally {
      await up.stop();
    }
  });

  it("every documented route and status was answered above (but a database outage)", () => {
    const missing: string[] = [];
    for (const { route, op } of operations(doc)) {
      for (const status of Object.keys(op.responses).map(Number)) {
        const answered = seen.get(route)?.has(status) ?? false;
        if (NOT_PROVOKED(route, status)) expect(answered, `${route} ${status} is listed as not provoked`).toBe(false);
        else if (!answered) missing.push(`${route} ${status}`);
      }
    }
    expect(missing).toEqual([]);
  });
});

describe("the reference page at /docs", () => {
  const get = (path: string, headers: Record<string, string> = {}) => docsApp.fetch(new Request(`http://linkgate.test${path}`, { headers }));
  const CSP =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

  it("is HTML under the dashboard's CSP, referencing only files of this origin, each served", async () => {
    const page = await get("/docs");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(page.headers.get("content-security-policy")).toBe(CSP);
    expect(CSP).toBe(PAGE_SECURITY_HEADERS["content-security-policy"]); // the dashboard's
    expect(page.headers.get("x-frame-options")).toBe("DENY");
    const html = await page.text();
    expect(html).not.toMatch(/https?:\/\//);
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/); // no inline script
    expect(html).not.toMatch(/<style|\sstyle=/);
    const refs = [...html.matchAll(/\b(?:src|href)="([^"]*)"/g)].map((m) => m[1]);
    expect(refs.length).toBeGreaterThanOrEqual(4);
    for (const ref of refs) {
      expect(ref, "a path of this origin").toMatch(/^\/[^/]/);
      const res = await get(ref);
      expect(res.status, ref).toBe(200);
      if (/\.(js|css)$/.test(ref)) expect(res.headers.get("content-security-policy"), ref).toBe(CSP);
    }
    const init = await (await get("/docs/init.js")).text();
    // beside /docs: /openapi.json at the root, under the issuer's path behind a proxy that strips it
    expect(init).toContain('url: "openapi.json"');
    expect(init).toContain("validatorUrl: null");
    expect(init).not.toMatch(/https?:\/\//);
  });

  it("serves only the package files it names, gzipped when asked", async () => {
    const bundle = [...(await (await get("/docs")).text()).matchAll(/src="([^"]*swagger-ui-bundle\.js)"/g)][0][1];
    const gz = await get(bundle, { "accept-encoding": "gzip" });
    expect(gz.headers.get("content-encoding")).toBe("gzip");
    expect(gz.headers.get("cache-control")).toContain("immutable");
    // by the header's weights: q=0 refuses gzip, the preferred coding wins
    for (const [header, gzipped] of [["br, gzip;q=0.5", true], ["gzip;q=0", false], ["gzip;q=0.2, identity", false], ["identity", false]] as const) {
      const res = await get(bundle, { "accept-encoding": header });
      expect(res.headers.get("content-encoding"), header).toBe(gzipped ? "gzip" : null);
      if (!gzipped) expect((await res.text()).length, header).toBeGreaterThan(100_000);
    }
    const base = bundle.slice(0, bundle.lastIndexOf("/") + 1);
    for (const other of ["package.json", "index.html", "swagger-initializer.js", "..%2F..%2Fpackage.json"]) expect((await get(base + other)).status, other).toBe(404);
  });

  it.skipIf(!!chromiumMissing)("renders all 29 operations in Chromium, opens some, with no CSP violation and no request off the site", async () => {
    const site = await listen(async (req) => docsApp.fetch(req));
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      const offSite: string[] = [];
      const errors: string[] = [];
      page.on("request", (r) => {
        if (!r.url().startsWith(site.url + "/") && !r.url().startsWith("data:")) offSite.push(r.url());
      });
      page.on("pageerror", (e) => errors.push(e.message));
      page.on("console", (m) => {
        if (m.type() === "error" && /Content Security Policy|Refused/.test(m.text())) errors.push(m.text());
      });
      await page.addInitScript(() => {
        const w = window as unknown as { violations: string[] };
        w.violations = [];
        document.addEventListener("securitypolicyviolation", (e) => w.violations.push(`${e.violatedDirective} ${e.blockedURI}`));
      });
      await page.goto(`${site.url}/docs`);
      await page.waitForSelector(".opblock");
      const summaries = page.locator(".opblock-summary");
      expect(await summaries.count()).toBe(ROUTES.length);
      // A few open, each with request and response schemas (opening all 29 takes ~40 s here).
      for (const path of ["/auth/otp/start", "/auth/passkey/registration/verify", "/readyz"]) {
        await summaries.filter({ has: page.locator(`[data-path="${path}"]`) }).first().click();
      }
      expect(await page.locator(".responses-table").count()).toBeGreaterThanOrEqual(3);
      await page.locator("button.authorize").first().click();
      await page.waitForSelector(".auth-container");
      expect(await page.evaluate(() => (window as unknown as { violations: string[] }).violations)).toEqual([]);
      expect(errors).toEqual([]);
      expect(offSite).toEqual([]);
    } finally {
      await browser.close();
      await site.close();
    }
  });
});
