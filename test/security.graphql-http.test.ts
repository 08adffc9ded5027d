// /graphql as a stranger holding a publishable key probes it over HTTP: only JSON POSTs and GETs
// are taken (a form or multipart POST needs no CORS preflight, so any web page could send one),
// malformed variables are the client's 4xx, not a masked 500, a HEAD keeps the headers every
// answer carries, and answers in the other formats yoga speaks are not stored by caches either.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

describe.each(backends)("/graphql over HTTP on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const query = `{ eventTypes }`;
  const send = (init: RequestInit & { path?: string }) =>
    h.app.fetch(new Request(`http://linkgate.test${init.path ?? "/graphql"}`, { ...init, headers: { "x-api-key": h.publishableKey, ...(init.headers as Record<string, string>) } }));

  it("a JSON POST, with or without a charset, and a GET are answered", async () => {
    for (const type of ["application/json", "Application/JSON; charset=utf-8"]) {
      const res = await send({ method: "POST", headers: { "content-type": type }, body: JSON.stringify({ query }) });
      expect(res.status, type).toBe(200);
      expect((await res.json()).data.eventTypes).toContain("user.created");
    }
    const get = await send({ method: "GET", path: `/graphql?query=${encodeURIComponent(query)}&variables=%7B%7D`, headers: { accept: "application/json" } });
    expect(get.status).toBe(200);
  });

  it.each([
    ["a form", "application/x-www-form-urlencoded", `query=${encodeURIComponent(query)}`],
    ["text", "text/plain", JSON.stringify({ query })],
    ["application/graphql", "application/graphql", query],
    ["multipart", "multipart/form-data; boundary=b", `--b\r\nContent-Disposition: form-data; name="operations"\r\n\r\n${JSON.stringify({ query })}\r\n--b--\r\n`],
  ])("a POST of %s is 415 UnsupportedMediaType, and nothing runs", async (_name, type, body) => {
    const res = await send({ method: "POST", headers: { "content-type": type }, body });
    expect(res.status).toBe(415);
    expect(await res.json()).toEqual({ error: "UnsupportedMediaType", message: "send the operation as Content-Type: application/json" });
    expect(res.headers.get("x-request-id")).toBeTruthy();
  });

  it.each(["variables=%7B", "variables=%5B1%5D", "extensions=nope"])("a GET with %s is 400 InvalidRequest, not a masked 500", async (param) => {
    const res = await send({ method: "GET", path: `/graphql?query=${encodeURIComponent(query)}&${param}`, headers: { accept: "application/json" } });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: "InvalidRequest", message: expect.stringMatching(/^(variables|extensions) must be a JSON object$/) });
  });

  it("a HEAD is 405 with the request id and no stray headers", async () => {
    const res = await send({ method: "HEAD", headers: { "x-request-id": "head-probe" } });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, POST, OPTIONS");
    expect(res.headers.get("x-request-id")).toBe("head-probe");
    for (const [name] of res.headers) expect(name).toMatch(/^[a-z0-9-]+$/);
    expect([...res.headers.keys()].join()).not.toMatch(/headersinit|_map/i);
  });

  it.each([
    [`{ deliveryChart(range: dayy) { from } }`, undefined], // a misspelt enum value, in validation
    [`mutation($i: IdentityProviderInput!) { createIdentityProvider(input: $i) { __typename } }`, { i: { clientSecre: "x" } }], // a misspelt field, in a variable
  ])("no error spells out the schema: %s", async (q, variables) => {
    const res = await send({ method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ query: q, variables }) });
    const body = await res.json();
    expect(body.errors?.length).toBeGreaterThan(0);
    for (const e of body.errors) expect(e.message).not.toMatch(/did you mean|"day"|clientSecret|clientId/i);
  });

  it.each(["multipart/mixed", "text/event-stream"])("an answer as %s is not stored by caches", async (accept) => {
    const res = await send({ method: "POST", headers: { "content-type": "application/json", accept }, body: JSON.stringify({ query }) });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain(accept);
    expect(res.headers.get("cache-control")).toBe("no-store");
    await res.text();
  });
});
