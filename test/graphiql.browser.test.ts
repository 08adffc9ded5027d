// GraphiQL served from the installed package, on this origin, under a strict CSP; and the
// switch (LINKGATE_GRAPHIQL, off by default in production) that turns it and introspection off.
// Checked over HTTP on each backend, and in a real Chromium (Debian's, via playwright-core).
import { gunzipSync } from "node:zlib";
import type { Browser, Request as PwRequest } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { chromiumMissing, launchChromium, listen, recordProblems, screenshots } from "./support/browser.ts";
import { backends } from "./support/db.ts";

const HTML = { accept: "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" };
const INTROSPECTION = "{ __schema { queryType { name } } }";

/** Directive name → its sources. */
function csp(header: string | null): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const part of (header ?? "").split(";")) {
    const [name, ...sources] = part.trim().split(/\s+/);
    if (name) out.set(name, sources);
  }
  return out;
}

/** Every src= and href= in the page. */
const references = (html: string) => [...html.matchAll(/\b(?:src|href)="([^"]*)"/g)].map((m) => m[1]);

describe.each(backends)("GraphiQL over HTTP on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(async () => {
    await h?.close();
  });

  it("GET /graphql from a browser is GraphiQL under a strict CSP, with nothing from another host", async () => {
    const res = await h.call("GET", "/graphql", { headers: HTML });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const policy = csp(res.headers.get("content-security-policy"));
    expect(policy.get("default-src")).toEqual(["'self'"]);
    expect(policy.get("script-src")).toEqual(["'self'"]);
    expect(policy.get("worker-src")).toEqual(["'self'"]);
    expect(policy.get("connect-src")).toEqual(["'self'"]);
    expect(policy.get("frame-ancestors")).toEqual(["'none'"]);
    expect(policy.get("base-uri")).toEqual(["'none'"]);
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");

    const html: string = res.body;
    expect(html).toContain('id="graphiql-options"');
    expect(html).not.toMatch(/https?:\/\//);
    expect(html).not.toMatch(/\bunpkg|jsdelivr|cdn\b/i);
    // Only external scripts and a JSON data block: nothing inline that script-src would need.
    for (const tag of html.match(/<script\b[^>]*>/g) ?? []) expect(tag).toMatch(/\bsrc="|type="application\/json"/);
  });

  it("serves every file the page and its boot script reference, from this origin", async () => {
    const html: string = (await h.call("GET", "/graphql", { headers: HTML })).body;
    const refs = references(html);
    expect(refs.length).toBeGreaterThanOrEqual(4);
    const boot = refs.find((r) => r.endsWith("/boot.js"))!;
    const bootJs: string = (await h.call("GET", boot)).body;
    const workers = [...bootJs.matchAll(/"([a-z]+\.worker\.js)"/g)].map((m) => boot.replace(/boot\.js$/, m[1]));
    expect(workers).toHaveLength(3);

    const types: Record<string, RegExp> = { js: /^text\/javascript/, css: /^text\/css/, ico: /^image\/x-icon/ };
    for (const ref of [...refs, ...workers]) {
      expect(ref, ref).toMatch(/^\/graphql\/assets\//);
      const res = await h.app.fetch(new Request(`http://linkgate.test${ref}`));
      expect(res.status, ref).toBe(200);
      expect(res.headers.get("content-type"), ref).toMatch(types[ref.split(".").pop()!]);
      expect(res.headers.get("cache-control"), ref).toContain("immutable");
      expect(res.headers.get("content-security-policy"), ref).toContain("script-src 'self'");
      expect((await res.arrayBuffer()).byteLength, ref).toBeGreaterThan(100);
    }
  });

  it("sends the bundle gzipped to clients that accept it, byte for byte the same", async () => {
    const html: string = (await h.call("GET", "/graphql", { headers: HTML })).body;
    const js = references(html).find((r) => r.endsWith("/graphiql.js"))!;
    const plain = Buffer.from(await (await h.app.fetch(new Request(`http://linkgate.test${js}`))).arrayBuffer());
    const res = await h.app.fetch(new Request(`http://linkgate.test${js}`, { headers: { "accept-encoding": "gzip, br" } }));
    expect(res.headers.get("content-encoding")).toBe("gzip");
    expect(res.headers.get("vary")).toContain("Accept-Encoding");
    const zipped = Buffer.from(await res.arrayBuffer());
    expect(zipped.length).toBeLessThan(plain.length / 2);
    expect(gunzipSync(zipped).equals(plain)).toBe(true);
  });

  it("answers 404 for a file it does not have, or another version's", async () => {
    const html: string = (await h.call("GET", "/graphql", { headers: HTML })).body;
    const base = references(html).find((r) => r.endsWith("/graphiql.js"))!.replace(/graphiql\.js$/, "");
    for (const p of [`${base}nope.js`, `${base}..%2f..%2fpackage.json`, "/graphql/assets/0.0.1/graphiql.js"]) {
      const res = await h.call("GET", p);
      expect(res.status, p).toBe(404);
      expect(res.body.error).toBe("NotFound");
    }
  });

  it("allows introspection while GraphiQL is on", async () => {
    const res = await h.gql(INTROSPECTION);
    expect(res.body).toEqual({ data: { __schema: { queryType: { name: "Query" } } } });
  });
});

describe.each(backends)("GraphiQL switched off on %s", (backend) => {
  describe.each<{ name: string; env: Record<string, string> }>([
    { name: "LINKGATE_GRAPHIQL=0", env: { LINKGATE_GRAPHIQL: "0" } },
    { name: "NODE_ENV=production", env: { NODE_ENV: "production" } },
  ])("$name", ({ env }) => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(backend, { env });
    });
    afterAll(async () => {
      await h?.close();
    });

    it("GET /graphql from a browser is not GraphiQL, and its files are not served", async () => {
      // The GraphQL endpoint itself answers: a GET with no query is a GraphQL error, not a page.
      const res = await h.call("GET", "/graphql", { headers: HTML });
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      expect(res.body.errors[0].message).toBe("Must provide query string.");
      expect(JSON.stringify(res.body)).not.toMatch(/graphiql/i);
      expect((await h.call("GET", "/graphql/assets/5.24.1/graphiql.js")).status).toBe(404);
    });

    it("refuses introspection, even with a secret key, and still runs ordinary queries", async () => {
      for (const query of [INTROSPECTION, '{ __type(name: "Query") { name } }']) {
        const res = await h.gql(query);
        expect(res.body.data, query).toBeUndefined();
        expect(res.body.errors?.[0]?.message, query).toMatch(/introspection has been disabled/);
      }
      expect((await h.gql("{ __typename }")).body).toEqual({ data: { __typename: "Query" } });
    });
  });
});

describe.skipIf(chromiumMissing)(`GraphiQL in Chromium${chromiumMissing ? ` (skipped: ${chromiumMissing})` : ""}`, () => {
  let h: Harness;
  let server: Awaited<ReturnType<typeof listen>>;
  let browser: Browser;
  let shots: ReturnType<typeof screenshots>;

  beforeAll(async () => {
    shots = screenshots("linkgate-graphiql");
    h = await startHarness("pglite");
    server = await listen(h.app.fetch);
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await h?.close();
    if (shots?.taken.length) console.log(`GraphiQL screenshots in ${shots.dir}:\n  ${shots.taken.join("\n  ")}`);
  });

  it("renders the editor, loads the schema and runs a query, with no other origin and no CSP violation", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const requests: string[] = [];
    const problems: string[] = [];
    // The context sees the workers' requests too, not only the page's.
    context.on("request", (r: PwRequest) => requests.push(r.url()));
    await recordProblems(page, problems);

    const res = await page.goto(`${server.url}/graphql`);
    expect(res?.status()).toBe(200);
    const editor = page.locator(".graphiql-query-editor .monaco-editor").first();
    await editor.waitFor({ timeout: 30_000 });
    await shots.take(page, "loaded");

    await editor.click();
    await page.keyboard.press("Control+A");
    await page.keyboard.press("Delete");
    await page.keyboard.type("{ __typename }");
    await page.getByRole("button", { name: /Execute query/ }).click();
    await expect.poll(() => page.locator(".graphiql-response").innerText()).toMatch(/"__typename":\s*"Query"/);

    // The documentation explorer shows the schema the page introspected.
    await page.getByRole("button", { name: /Documentation Explorer/ }).click();
    await expect.poll(() => page.locator(".graphiql-doc-explorer").innerText()).toMatch(/query:\s*Query/);
    await shots.take(page, "query-and-docs");

    const origin = new URL(server.url).origin;
    const elsewhere = requests.filter((u) => !u.startsWith("data:") && new URL(u).origin !== origin);
    expect(elsewhere).toEqual([]);
    expect(requests.some((u) => u.endsWith(".worker.js"))).toBe(true);
    expect(problems).toEqual([]);
    await context.close();
  });

  it("on a 390 px phone, welcomes to linkgate's API (headers and a first query) in an editor nothing covers", async () => {
    const context = await browser.newContext({ viewport: { width: 390, height: 844 } });
    const page = await context.newPage();
    await page.goto(`${server.url}/graphql`);
    const editor = page.locator(".graphiql-query-editor .monaco-editor").first();
    await editor.waitFor({ timeout: 30_000 });
    await shots.take(page, "phone-390");

    // Monaco writes spaces as U+00A0.
    const welcome = (await editor.locator(".view-lines").innerText()).replace(/\u00a0/g, " ");
    expect(welcome).toContain("linkgate's GraphQL API");
    expect(welcome).toMatch(/X-API-Key: lg_sk_/);
    expect(welcome).toMatch(/X-API-Key: lg_pk_/);
    expect(welcome).toContain("Authorization: Bearer <access_token");
    expect(welcome).not.toContain("in-browser tool");

    type Box = { x: number; y: number; width: number; height: number };
    const box = async (selector: string) => (await page.locator(selector).first().boundingBox())!;
    const overlap = (a: Box, b: Box) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
    const e = await box(".graphiql-query-editor .monaco-editor");
    expect(e.x).toBeGreaterThanOrEqual(0);
    expect(e.x + e.width).toBeLessThanOrEqual(390);
    expect(e.width, "the editor takes most of the width").toBeGreaterThan(390 * 0.6);
    expect(e.height).toBeGreaterThan(200);
    for (const other of [".graphiql-toolbar", ".graphiql-response", ".graphiql-session-header", ".graphiql-sidebar", ".graphiql-editor-tools"]) {
      expect(overlap(e, await box(other)), `the editor and ${other} overlap`).toBe(false);
    }
    // Nothing is painted over it: each point inside the editor hits the editor.
    const covered = await page.evaluate((b: Box) => {
      const root = document.querySelector(".graphiql-query-editor .monaco-editor")!;
      const points = [0.05, 0.5, 0.95].flatMap((fx) => [0.1, 0.5, 0.9].map((fy) => [b.x + b.width * fx, b.y + b.height * fy]));
      return points.filter(([x, y]) => !root.contains(document.elementFromPoint(x!, y!))).map(([x, y]) => `${Math.round(x!)},${Math.round(y!)}`);
    }, e);
    expect(covered).toEqual([]);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);

    // The first query runs as it is, with the default headers, and its answer shows below.
    await page.getByRole("button", { name: /Execute query/ }).click();
    await expect.poll(() => page.locator(".graphiql-response").innerText()).toContain("user.created");
    const r = await box(".graphiql-response");
    expect(r.y).toBeGreaterThanOrEqual(e.y + e.height);
    expect(r.width).toBeGreaterThan(390 * 0.6);
    await shots.take(page, "phone-390-answer");
    await context.close();
  });

  // 30th review: yoga's GraphiQL kept the Headers tab (a secret key, a token) in localStorage for
  // good, readable by any script of this origin, and the site that opened the tab could send it
  // to a look-alike asking for the key again
  it("keeps no header in the browser's storage, drops what an earlier version kept, and cannot be sent elsewhere by its opener", async () => {
    const key = "lg_sk_test_typedIntoGraphiQL";
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${server.url}/graphql`);
    await page.evaluate((k) => {
      localStorage.setItem("graphiql:headers", JSON.stringify({ "X-API-Key": k }));
      localStorage.setItem("graphiql:tabState", JSON.stringify({ tabs: [{ id: "t", hash: null, headers: JSON.stringify({ "X-API-Key": k }), query: "{ __typename }" }], activeTabIndex: 0 }));
    }, key);
    await page.reload();
    await page.locator(".graphiql-query-editor .monaco-editor").first().waitFor({ timeout: 30_000 });
    const stored = () => page.evaluate(() => Object.entries(localStorage).map(([k, v]) => `${k}=${v}`).join("\n"));
    expect(await stored()).not.toContain(key);

    // typed into the Headers tab now, and run
    await page.getByRole("button", { name: /^Headers$/ }).click();
    const headers = page.locator(".graphiql-editor-tool .monaco-editor").last();
    await headers.click();
    await page.keyboard.press("Control+A");
    await page.keyboard.press("Delete");
    await page.keyboard.type(`{"X-API-Key": "${key}"`);
    await page.getByRole("button", { name: /Execute query/ }).click();
    await expect.poll(() => page.locator(".graphiql-response").innerText()).toMatch(/errors|data/);
    expect(await stored()).not.toContain(key);

    const res = await fetch(`${server.url}/graphql`, { headers: { accept: "text/html" } });
    expect(res.headers.get("cross-origin-opener-policy")).toBe("same-origin");
    await context.close();
  });
});
