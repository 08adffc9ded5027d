// The OpenID Connect endpoints are oidc-provider's (a Koa app): a method or path under them it has
// no route for was answered by Koa, a bare text/plain "Not Found" that no cache was told to leave
// alone. It is the API's 404 in the error shape (docs/rest.md: "Any other path or method").
// HTTP-level behaviour, the same on both backends: it runs on PGlite.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";

describe("methods and paths oidc-provider does not serve", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness("pglite");
  });
  afterAll(async () => {
    await h?.close();
  });

  it.each([
    ["GET", "/oauth/token"],
    ["GET", "/oauth/revoke"],
    ["POST", "/oauth/logout"],
    ["POST", "/oauth/logout/success"],
    ["POST", "/oauth/authorize"],
    ["POST", "/oauth/authorize/no-such-interaction"],
  ])("%s %s is 404 NotFound in the error shape, not cacheable", async (method, path) => {
    const res = await h.call(method, path, method === "POST" ? { raw: "client_id=x", headers: { "content-type": "application/x-www-form-urlencoded" } } : {});
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.body).toEqual({ error: "NotFound", message: `no route for ${method} ${path}` });
  });

  it("what oidc-provider serves is still its own answer", async () => {
    const token = await h.call("POST", "/oauth/token", { raw: "grant_type=authorization_code&code=x", headers: { "content-type": "application/x-www-form-urlencoded" } });
    expect(token.status).toBe(400);
    expect(token.body).toMatchObject({ error: "invalid_request" });
    const logout = await h.call("GET", "/oauth/logout");
    expect(logout.status).toBe(200);
    expect(logout.headers.get("content-type")).toMatch(/^text\/html/);
  });
});
