// What the browser's Back button brings back after signing out of the hosted pages
// (docs/security.md, "Input, tenants and pages"). Browsers keep a page they leave in their
// back/forward cache and show it again as it was, without running its script: /account, left by
// "Sign out", came back with the account's addresses and sessions for whoever used the browser
// next, though its tokens were gone, and one more Back showed /login with the address its code
// had gone to. Chromium here keeps that cache on, as every user's does.
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { chromiumMissing, launchChromium, listen } from "./support/browser.ts";
import { backends } from "./support/db.ts";
import { openDevice } from "./support/pages.ts";

describe.skipIf(chromiumMissing).each(backends)("Back after signing out of /account, in Chromium with its back/forward cache, on %s", (backend) => {
  let browser: Browser;
  let h: Harness;
  let server: Awaited<ReturnType<typeof listen>>;
  let origin = "";
  beforeAll(async () => {
    browser = await launchChromium({ backForwardCache: true });
    let app: Harness["app"] | null = null;
    server = await listen((req: Request) => (app ? app.fetch(req) : Promise.resolve(new Response("starting", { status: 503 }))));
    origin = server.url.replace("127.0.0.1", "localhost");
    h = await startHarness(backend, { env: { LINKGATE_ISSUER: origin } });
    app = h.app;
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await h?.close();
  });

  async function signInByCode(page: Page, email: string) {
    await page.goto(`${origin}/login`);
    await page.keyboard.type(email);
    await page.keyboard.press("Enter");
    await page.getByLabel("Code").waitFor();
    await page.keyboard.type(await h.mailbox.otp(email));
    await page.keyboard.press("Enter");
    await page.waitForURL(`${origin}/account`);
    await page.getByText(email).first().waitFor();
  }

  it("Back shows the sign-in page, not the account as it was, and once more a fresh sign-in page, not the address the code went to", async () => {
    const device = await openDevice(browser);
    const { page } = device;
    try {
      const email = "back-after-sign-out@example.com";
      await signInByCode(page, email);
      await page.getByRole("button", { name: "Sign out" }).click();
      await page.waitForURL(`${origin}/login?why=signed-out`);

      // "commit": a page the cache brings back fires no load event
      await page.goBack({ waitUntil: "commit" });
      await page.waitForURL(`${origin}/login?return_to=%2Faccount`);
      await page.getByRole("button", { name: "Sign in with a passkey" }).waitFor();
      expect(await page.getByText(email).count()).toBe(0);

      await page.goBack({ waitUntil: "commit" });
      await page.waitForURL(`${origin}/login`, { waitUntil: "commit" });
      // loaded again: the first step, with nothing typed
      await expect.poll(() => page.evaluate(() => performance.getEntriesByType("navigation")[0]?.toJSON().type)).toBe("reload");
      await page.getByLabel("E-mail or phone number").waitFor();
      expect(await page.getByLabel("E-mail or phone number").inputValue()).toBe("");
      expect(await page.getByText(email).count()).toBe(0);
    } finally {
      await device.close();
    }
  });
});
