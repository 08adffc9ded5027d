// Browsers may call the API only from configured origins and never with credentials; a token
// signed with the real key is still refused when it has no expiry or claims to come from the
// future.
import { importJWK, SignJWT, type JWK } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { unseal } from "../src/crypto.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

describe.each(backends)("CORS on %s", (backend) => {
  let plain: Harness, configured: Harness;
  beforeAll(async () => {
    plain = await startHarness(backend);
    configured = await startHarness(backend, { env: { LINKGATE_CORS_ORIGINS: "https://app.example.com, https://admin.example.com" } });
  });
  afterAll(async () => {
    await plain?.close();
    await configured?.close();
  });

  const preflight = (h: Harness, origin: string, path = "/graphql") =>
    h.call("OPTIONS", path, { headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "content-type,x-api-key" } });

  it("unset: no origin is allowed (same origin only), and credentials never are", async () => {
    for (const path of ["/graphql", "/auth/otp/start", "/users/link/request"]) {
      const pre = await preflight(plain, "https://evil.example", path);
      expect(pre.headers.get("access-control-allow-origin")).toBeNull();
      expect(pre.headers.get("access-control-allow-credentials")).toBeNull();
      // no CORS headers at all (docs/security.md, "CORS"), and no preflight's 204
      for (const name of ["access-control-allow-headers", "access-control-allow-methods", "access-control-max-age", "access-control-expose-headers"]) {
        expect(pre.headers.get(name), `${path} ${name}`).toBeNull();
      }
      expect(pre.status, path).not.toBe(204);
    }
    // an OPTIONS that is no preflight is a method no REST route takes: 404 in the error shape (docs/rest.md)
    const bare = await plain.call("OPTIONS", "/auth/otp/start");
    expect(bare.status).toBe(404);
    expect(bare.body).toEqual({ error: "NotFound", message: "no route for OPTIONS /auth/otp/start" });
    const r = await plain.call("POST", "/auth/otp/start", { body: { email: "cors@example.com" }, headers: { origin: "https://evil.example" } });
    expect(r.headers.get("access-control-allow-origin")).toBeNull();
    expect(r.headers.get("access-control-expose-headers")).toBeNull();
    expect(r.headers.get("vary")).toContain("Origin");
    const g = await plain.call("POST", "/graphql", { body: { query: "{ eventTypes }" }, headers: { origin: "https://evil.example" } });
    expect(g.status).toBe(200);
    expect(g.headers.get("access-control-allow-origin")).toBeNull();
    expect(g.headers.get("access-control-allow-credentials")).toBeNull();
  });

  it("configured: exactly those origins, echoed, without credentials; others get nothing", async () => {
    const pre = await preflight(configured, "https://app.example.com");
    expect(pre.headers.get("access-control-allow-origin")).toBe("https://app.example.com");
    expect(pre.headers.get("access-control-allow-credentials")).toBeNull();
    expect(pre.headers.get("access-control-allow-headers")?.toLowerCase()).toContain("x-api-key");
    const r = await configured.call("POST", "/auth/otp/start", { body: { email: "cors2@example.com" }, headers: { origin: "https://admin.example.com" } });
    expect(r.status).toBe(200);
    expect(r.headers.get("access-control-allow-origin")).toBe("https://admin.example.com");
    expect(r.headers.get("access-control-allow-credentials")).toBeNull();
    expect(r.headers.get("access-control-expose-headers")).toBe("X-Request-Id,Retry-After");
    expect(r.headers.get("vary")).toContain("Origin"); // a cache must not hand this answer to another origin
    const g = await configured.call("POST", "/graphql", { body: { query: "{ eventTypes }" }, headers: { origin: "https://app.example.com" } });
    expect(g.headers.get("access-control-allow-origin")).toBe("https://app.example.com");
    expect(g.headers.get("access-control-allow-credentials")).toBeNull();
    for (const origin of ["https://evil.example", "https://app.example.com.evil.example", "null", "http://app.example.com"]) {
      expect((await preflight(configured, origin)).headers.get("access-control-allow-origin")).toBeNull();
    }
  });

  it("the public key set and discovery may be read from anywhere, without credentials", async () => {
    const r = await plain.call("GET", "/.well-known/jwks.json", { headers: { origin: "https://anyone.example" } });
    expect(r.headers.get("access-control-allow-origin")).toBe("*");
    expect(r.headers.get("access-control-allow-credentials")).toBeNull();
  });
});

describe.each(backends)("access tokens on %s", (backend) => {
  let h: Harness;
  let sign: (claims: Record<string, unknown>) => Promise<string>;
  let user: { token: string; accountId: string };
  beforeAll(async () => {
    h = await startHarness(backend);
    user = await h.signIn({ email: "tokens@example.com" });
    const key = await h.db.prisma.signingKey.findFirstOrThrow({ where: { retiredAt: null }, orderBy: { createdAt: "desc" } });
    const privateKey = await importJWK(JSON.parse(unseal(h.app.deps.master, key.privateSealed)) as JWK, "ES256");
    const { sid } = JSON.parse(Buffer.from(user.token.split(".")[1], "base64url").toString());
    // The real signing key, the real session: only the claims under test differ.
    sign = (claims) =>
      new SignJWT({ token_use: "access", sid, ...claims })
        .setProtectedHeader({ alg: "ES256", kid: key.id, typ: "JWT" })
        .setIssuer(h.app.deps.keys.issuer)
        .setSubject(user.accountId)
        .setAudience(h.projectId)
        .sign(privateKey);
  });
  afterAll(() => h?.close());

  const userinfo = (token: string) => h.call("GET", "/oauth/userinfo", { headers: { authorization: `Bearer ${token}` } });
  const now = () => Math.floor(Date.now() / 1000);

  it("a well-formed token of the real key passes (the control)", async () => {
    expect((await userinfo(await sign({ iat: now(), exp: now() + 600 }))).status).toBe(200);
    expect((await userinfo(await sign({ iat: now() + 30, exp: now() + 600 }))).status).toBe(200); // within 60 s of skew
  });

  it("no exp: refused", async () => {
    const r = await userinfo(await sign({ iat: now() }));
    expect(r.status).toBe(401);
    expect(r.body.error).toBe("Unauthenticated");
    const linked = await h.call("POST", "/users/link/request", { body: { email: "x@example.com" }, headers: { authorization: `Bearer ${await sign({ iat: now() })}` } });
    expect(linked.status).toBe(401);
  });

  it("no iat, or iat more than 60 s in the future: refused", async () => {
    expect((await userinfo(await sign({ exp: now() + 600 }))).status).toBe(401);
    expect((await userinfo(await sign({ iat: now() + 3600, exp: now() + 7200 }))).status).toBe(401);
  });
});
