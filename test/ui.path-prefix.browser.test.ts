// The hosted pages and the dashboard in Chromium under a path prefix of the public URL
// (LINKGATE_ISSUER=http://localhost:PORT/auth) behind a proxy that strips it, as nginx's
// `location /auth/ { proxy_pass http://gateway/; }` does (docs/operations.md, "Behind a reverse
// proxy"). Their scripts asked for /graphql, /oauth/interaction/… and /login from the root,
// outside the proxy's location: nothing loaded, and nobody could sign in.
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { chromiumMissing, launchChromium, listen } from "./support/browser.ts";
import { backends } from "./support/db.ts";
import { openDevice } from "./support/pages.ts";

let browserReady: Promise<Browser> | null = null;
const sharedBrowser = () => (browserReady ??= launchChromium());
afterAll(async () => {
  if (browserReady) await (await browserReady).close();
});

describe.skipIf(chromiumMissing).concurrent.each(backends)("the pages under a stripped path prefix on %s", (backend) => {
  let h: Harness;
  let site: { url: string; close(): Promise<void> };
  let issuer: string;

  beforeAll(async () => {
    let app: Harness["app"] | null = null;
    site = await listen(async (req: Request) => {
      const url = new URL(req.url);
      if (!app) return new Response("starting", { status: 503 });
      if (!url.pathname.startsWith("/auth/")) return new Response("outside the proxy's location", { status: 404 });
      const headers = new Headers(req.headers);
      headers.set("x-forwarded-for", "203.0.113.20");
      headers.set("x-forwarded-proto", "http");
      const body = req.method === "GET" || req.method === "HEAD" ? undefined : await req.arrayBuffer();
      return app.fetch(new Request(`${url.origin}${url.pathname.slice("/auth".length)}${url.search}`, { method: req.method, headers, body }), {
        incoming: { socket: { remoteAddress: "127.0.0.1" } },
      });
    });
    issuer = `${site.url.replace("127.0.0.1", "localhost")}/auth`;
    h = await startHarness(backend, { env: { LINKGATE_ISSUER: issuer, LINKGATE_TRUSTED_PROXIES: "loopback" } });
    app = h.app;
  }, 120_000);
  afterAll(async () => {
    await site?.close();
    await h?.close();
  });

  it.sequential("signs in by code on /auth/login, lands on /auth/account, and the dashboard signs in with the key, every request under /auth/", async () => {
    const device = await openDevice(await sharedBrowser());
    const failed: string[] = [];
    device.page.on("response", (r) => r.status() >= 400 && failed.push(`${r.status()} ${r.url()}`));
    try {
      const { page } = device;
      await page.goto(`${issuer}/account`);
      await page.waitForURL(`${issuer}/login?**`);
      const email = "prefix.pages@example.com";
      await page.getByLabel("E-mail or phone number").fill(email);
      await page.getByRole("button", { name: "Send me a code" }).click();
      await page.getByLabel("Code").fill(await h.mailbox.otp(email));
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.waitForURL(`${issuer}/account`);
      await page.getByRole("heading", { name: /Your account/ }).waitFor();

      await page.goto(`${issuer}/dashboard`);
      await page.getByLabel("Project API key").fill(h.apiKey);
      await page.getByRole("button", { name: "Continue" }).click();
      await page.getByText("No webhooks yet.").waitFor();

      expect(failed).toEqual([]);
      expect(device.problems).toEqual([]);
      expect(device.requests.filter((u) => !u.startsWith(`${issuer}/`) && !u.startsWith("data:"))).toEqual([]);
    } finally {
      await device.close();
    }
  }, 120_000);
});
