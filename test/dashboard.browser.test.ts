// The webhook dashboard in a real browser (Debian's Chromium via playwright-core) against a whole
// app on a loopback port, a delivery worker and a real receiver: what an owner does, checked on
// the page and at the receiver. Screenshots go to a temporary folder (printed at the end).
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Hono } from "hono";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWorker, type DeliveryWorker } from "../src/delivery/worker.ts";
import { dashboardRoutes } from "../src/http/routes/dashboard.ts";
import { verifyWebhook } from "../src/webhooks/receiver.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { buildDashboard, chromiumMissing, launchChromium, listen, screenshots } from "./support/browser.ts";
import { TestReceiver } from "./support/receiver.ts";

describe("dashboard static files", () => {
  let root: string;
  const app = (r: string) => new Hono().route("/", dashboardRoutes({ root: r }));
  const get = (r: string, p: string) => app(r).fetch(new Request(`http://x${p}`));

  beforeAll(() => {
    root = mkdtempSync(path.join(tmpdir(), "linkgate-dist-"));
    mkdirSync(path.join(root, "assets"));
    writeFileSync(path.join(root, "index.html"), "<!doctype html><title>t</title>");
    writeFileSync(path.join(root, "assets", "a-1.js"), "export {}");
    writeFileSync(path.join(root, "assets", "a-1.css"), "body{}");
    writeFileSync(path.join(root, ".secret"), "no");
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("serves index.html at /dashboard and assets with their content types", async () => {
    for (const p of ["/dashboard", "/dashboard/", "/dashboard/index.html"]) {
      const res = await get(root, p);
      expect(res.status, p).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(res.headers.get("cache-control")).toBe("no-cache");
      expect(res.headers.get("content-security-policy")).toContain("default-src 'self'");
      expect(await res.text()).toContain("<title>t</title>");
    }
    const js = await get(root, "/dashboard/assets/a-1.js");
    expect(js.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(js.headers.get("cache-control")).toContain("immutable");
    expect((await get(root, "/dashboard/assets/a-1.css")).headers.get("content-type")).toBe("text/css; charset=utf-8");
    expect((await get(root, "/dashboard/assets/nope.js")).status).toBe(404);
  });

  it("never serves files outside the build, nor dotfiles", async () => {
    for (const p of ["/dashboard/..%2fpackage.json", "/dashboard/%2e%2e/%2e%2e/package.json", "/dashboard/assets/..%5c..%5cpackage.json", "/dashboard/.secret", "/dashboard/%00", "/dashboard/%E0%A4%A"]) {
      const res = await get(root, p);
      expect(res.status, p).toBe(404);
      expect(await res.text()).not.toContain("linkgate");
    }
  });

  it("answers 503 with what to run when the dashboard is not built", async () => {
    const res = await get(path.join(root, "missing"), "/dashboard");
    expect(res.status).toBe(503);
    expect(await res.text()).toContain("npm run dashboard:build");
  });
});

describe.skipIf(chromiumMissing)(`dashboard in Chromium${chromiumMissing ? ` (skipped: ${chromiumMissing})` : ""}`, () => {
  let h: Harness;
  let server: Awaited<ReturnType<typeof listen>>;
  let worker: DeliveryWorker;
  let receiver: TestReceiver;
  let browser: Browser;
  let page: Page;
  let shots: ReturnType<typeof screenshots>;
  let secret = "";
  let oldSecret = "";

  beforeAll(async () => {
    shots = screenshots("linkgate-dashboard");
    await buildDashboard();
    h = await startHarness("pglite", { env: { LINKGATE_WEBHOOK_RETRY_SCHEDULE_MS: "100,100,100,100,100" } });
    server = await listen(h.app.fetch);
    worker = startWorker({ db: h.db, config: h.config, masterKey: h.app.deps.master, pollMs: 50 });
    receiver = await TestReceiver.start();
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(10_000);
  });
  afterAll(async () => {
    await browser?.close();
    await worker?.stop();
    await server?.close();
    await receiver?.close();
    await h?.close();
    if (shots?.taken.length) console.log(`dashboard screenshots in ${shots.dir}:\n  ${shots.taken.map((f) => path.basename(f)).join("\n  ")}`);
  });

  /** The delivery of one event in the log, once it has this status. */
  const delivery = (eventId: string, status: string) => page.locator(`li.delivery[data-event-id="${eventId}"][data-status="${status}"]`);

  /** Sends a test event from the page; returns its event id as the page shows it. */
  const sent: string[] = [];
  async function sendTestEvent(type: string): Promise<string> {
    await page.getByLabel("Event type", { exact: true }).selectOption(type);
    await page.getByRole("button", { name: "Send test event" }).click();
    const handle = await page.waitForFunction(
      (seen) => {
        const m = /Test event (evt_[\w-]+)/.exec(document.querySelector("[data-test-result]")?.textContent ?? "");
        return m && !seen.includes(m[1]) ? m[1] : null;
      },
      sent,
    );
    const id = (await handle.jsonValue()) as string;
    sent.push(id);
    return id;
  }

  const receiptOf = async (eventId: string, nth = 1) => {
    for (let i = 0; i < 200; i++) {
      const matching = receiver.receipts.filter((r) => r.headers["x-service-event-id"] === eventId);
      if (matching.length >= nth) return matching[nth - 1];
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`the receiver never got ${eventId} (${nth})`);
  };

  it("asks for the project API key once, refusing a wrong one next to the field", async () => {
    await page.goto(`${server.url}/dashboard`);
    const key = page.getByLabel("Project API key");
    await key.fill("lg_not_a_key");
    await key.press("Enter");
    const err = page.locator("#api-key-error");
    await err.waitFor();
    expect(await err.textContent()).toMatch(/not accepted/);
    expect(await key.getAttribute("aria-describedby")).toContain("api-key-error");
    await shots.take(page, "key-refused");

    // The key a front-end app ships cannot manage webhooks: the page says which key it needs.
    await key.fill(h.publishableKey);
    await key.press("Enter");
    await page.waitForFunction(() => /publishable/.test(document.querySelector("#api-key-error")?.textContent ?? ""));
    expect(await err.textContent()).toMatch(/publishable key.*secret key \(lg_sk_…\)/);
    expect(await page.evaluate(() => sessionStorage.getItem("linkgate.apiKey"))).toBeNull();
    await shots.take(page, "publishable-key-refused");

    await key.fill(h.apiKey);
    await key.press("Enter");
    await page.getByRole("heading", { name: "Webhooks", exact: true }).waitFor();
    expect(await page.locator(".empty").textContent()).toContain("No webhooks yet");
    expect(await page.evaluate(() => sessionStorage.getItem("linkgate.apiKey"))).toBe(h.apiKey);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    await page.reload();
    await page.getByRole("link", { name: "New webhook" }).waitFor();
    expect(await page.getByLabel("Project API key").count()).toBe(0);
  });

  it("shows the API's error next to the URL field for an invalid URL", async () => {
    await page.getByRole("link", { name: "New webhook" }).click();
    await page.getByLabel("Endpoint URL").fill("ftp://x");
    await page.getByRole("button", { name: "Select all" }).click();
    await page.getByRole("button", { name: "Create webhook" }).click();
    const err = page.locator("#new-url-error");
    await err.waitFor();
    expect(await err.textContent()).toMatch(/http|scheme|url/i);
    const url = page.getByLabel("Endpoint URL");
    expect(await url.getAttribute("aria-invalid")).toBe("true");
    expect(await url.getAttribute("aria-describedby")).toContain("new-url-error");
    expect(await url.evaluate((el) => el === document.activeElement)).toBe(true);
    await shots.take(page, "invalid-url");
  });

  it("creates a webhook for every event type and shows its secret once", async () => {
    await page.getByLabel("Endpoint URL").fill(receiver.url);
    await page.getByLabel("Description").fill("local receiver");
    await page.getByRole("button", { name: "Create webhook" }).click();
    const shown = page.locator("#secret-value");
    await shown.waitFor();
    secret = await shown.inputValue();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(await page.locator("#detail-title").textContent()).toBe(receiver.url);
    expect(await page.locator(".detail .state").textContent()).toContain("enabled");
    const events = await page.locator(".detail .chip").allTextContents();
    expect(events).toContain("user.created");
    expect(events).toContain("user.merged");
    expect(await page.locator(".webhooks").textContent()).toContain(receiver.url);
    await shots.take(page, "created-secret");

    await page.reload();
    await page.locator("#detail-title").waitFor();
    expect(await page.locator("#secret-value").count()).toBe(0);
  });

  it("sends a test event and shows its delivery succeeded; the receiver verifies it with the secret", async () => {
    const eventId = await sendTestEvent("user.created");
    const row = delivery(eventId, "succeeded");
    await row.waitFor();
    expect(await row.textContent()).toContain("HTTP 200");
    expect(await row.textContent()).toContain("1 attempt");

    const got = await receiptOf(eventId);
    const v = verifyWebhook(got.body, got.headers, secret);
    expect(v.ok).toBe(true);
    if (v.ok) expect(v.envelope.test).toBe(true);

    await row.getByText("Attempts, responses and headers sent").click();
    const details = await row.locator("details.log").textContent();
    expect(details).toMatch(/X-Service-Signature: sha256=[0-9a-f]{64}/);
    expect(details).toContain("Response (first 1 KiB)");
    expect(await page.locator(".detail .rate").textContent()).toBe("100 %");
    await shots.take(page, "delivered");
  });

  it("rotates the secret; the next delivery still verifies with the old secret", async () => {
    oldSecret = secret;
    await page.getByRole("button", { name: "Rotate secret" }).click();
    await page.getByRole("heading", { name: "New signing secret" }).waitFor();
    secret = await page.locator("#secret-value").inputValue();
    expect(secret).toMatch(/^whsec_/);
    expect(secret).not.toBe(oldSecret);
    expect(await page.locator(".notice.secret").textContent()).toContain("previous secret keeps verifying deliveries until");
    await page.getByText("Previous secret valid until").waitFor();

    const eventId = await sendTestEvent("user.updated");
    await delivery(eventId, "succeeded").waitFor();
    const got = await receiptOf(eventId);
    expect(verifyWebhook(got.body, got.headers, oldSecret).ok).toBe(true);
    expect(verifyWebhook(got.body, got.headers, secret).ok).toBe(true);
    await shots.take(page, "rotated");
    await page.getByRole("button", { name: "I have stored it" }).click();
    expect(await page.locator("#secret-value").count()).toBe(0);
  });

  it("shows a failing receiver's delivery as failed, filters by status, and redelivers it once fixed", async () => {
    receiver.setFallback({ status: 500, body: "receiver broken" });
    const eventId = await sendTestEvent("user.deleted");
    const failed = delivery(eventId, "failed");
    await failed.waitFor();
    expect(await failed.textContent()).toContain("HTTP 500");
    expect(await failed.textContent()).toContain("6 attempts");
    await failed.getByText("Attempts, responses and headers sent").click();
    await failed.getByText("receiver broken").first().waitFor(); // the newest attempt is open
    expect(await failed.locator("details.attempt").count()).toBe(6);

    await page.getByLabel("Show status").selectOption("failed");
    await page.waitForFunction(() => [...document.querySelectorAll("li.delivery")].every((li) => li.getAttribute("data-status") === "failed"));
    expect(await page.locator("li.delivery").count()).toBe(1);
    await shots.take(page, "failed-filtered");
    await page.getByLabel("Show status").selectOption("");
    await page.getByLabel("Show event type").selectOption("user.created");
    await page.waitForFunction(() => {
      const rows = [...document.querySelectorAll("li.delivery .etype")];
      return rows.length === 1 && rows[0].textContent === "user.created";
    });
    await page.getByLabel("Show event type").selectOption("");
    await page.waitForFunction(() => document.querySelectorAll("li.delivery").length === 3);

    receiver.setFallback({ status: 200 });
    await failed.getByRole("button", { name: /^Redeliver/ }).click();
    const ok = delivery(eventId, "succeeded");
    await ok.waitFor();
    const got = await receiptOf(eventId, 7);
    expect(verifyWebhook(got.body, got.headers, secret).ok).toBe(true);
    await shots.take(page, "redelivered");
  });

  it("replays failed deliveries since a time", async () => {
    receiver.setFallback({ status: 503 });
    const eventId = await sendTestEvent("user.merged");
    await delivery(eventId, "failed").waitFor();
    receiver.setFallback({ status: 200 });
    await page.getByRole("button", { name: "Replay failed" }).click();
    await page.getByText("1 failed delivery queued again.").waitFor();
    await delivery(eventId, "succeeded").waitFor();
  });

  it("is readable at phone width", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.locator("#detail-title").waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    expect(await page.getByRole("link", { name: "← All webhooks" }).isVisible()).toBe(true);
    await shots.take(page, "phone-webhook");
    await page.getByRole("link", { name: "← All webhooks" }).click();
    await page.locator(".webhooks").waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await shots.take(page, "phone-list");
    await page.getByRole("link", { name: /local receiver/ }).click();
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it("edits, disables and enables, then deletes after a confirmation", async () => {
    await page.getByRole("button", { name: "Edit", exact: true }).click();
    await page.getByLabel("Description").fill("renamed receiver");
    await page.getByRole("button", { name: "Save changes" }).click();
    await page.locator(".detail").getByText("renamed receiver").waitFor();

    await page.getByRole("button", { name: "Disable", exact: true }).click();
    await page.getByRole("button", { name: "Enable", exact: true }).waitFor();
    expect(await page.locator(".detail .state").textContent()).toContain("disabled by the project");
    await page.locator(".webhooks").getByText("disabled", { exact: true }).waitFor();
    await shots.take(page, "disabled");
    await page.getByRole("button", { name: "Enable", exact: true }).click();
    await page.getByRole("button", { name: "Disable", exact: true }).waitFor();
    expect(await page.locator(".detail .state").textContent()).toBe("enabled");

    // The confirmation takes the focus in the same task that opens it, before any frame is
    // painted: a key pressed right after the click (Enter here) goes to Cancel, never to
    // whatever had the focus before.
    const focusedOnOpen = await page.evaluate(async () => {
      const button = [...document.querySelectorAll<HTMLButtonElement>(".detail .actions button")].find((b) => b.textContent === "Delete");
      button!.click();
      await Promise.resolve(); // the render Preact queued during the click runs first
      return document.activeElement?.textContent;
    });
    expect(focusedOnOpen).toBe("Cancel");
    await page.keyboard.press("Enter");
    expect(await page.getByRole("button", { name: "Delete webhook" }).count()).toBe(0);

    await page.getByRole("button", { name: "Delete", exact: true }).click();
    // Cancel has the focus: Enter does not delete.
    await page.keyboard.press("Enter");
    expect(await page.getByRole("button", { name: "Delete webhook" }).count()).toBe(0);
    await page.getByRole("button", { name: "Delete", exact: true }).click();
    await shots.take(page, "confirm-delete");
    await page.getByRole("button", { name: "Delete webhook" }).click();
    await page.getByText("No webhooks yet.").waitFor();
    expect(await h.db.prisma.webhook.count({ where: { projectId: h.projectId } })).toBe(0);
  });

  it("lists more than a page of webhooks, a page at a time", async () => {
    const gql = (query: string, variables: Record<string, unknown>) => h.gql(query, variables);
    const create = `mutation($input: WebhookInput!) { createWebhook(input: $input) { __typename } }`;
    for (let i = 0; i < 103; i++) {
      const r = await gql(create, { input: { url: `${receiver.url}?n=${i}`, events: ["user.created"], description: `hook ${i}` } });
      expect(r.body.data.createWebhook.__typename).toBe("CreateWebhookPayload");
    }
    await page.reload();
    const items = page.locator(".webhooks > li");
    await page.waitForFunction(() => document.querySelectorAll(".webhooks > li").length === 100);
    expect(await items.first().textContent()).toContain("hook 0");
    await page.getByRole("button", { name: "Show more webhooks" }).click();
    await page.waitForFunction(() => document.querySelectorAll(".webhooks > li").length === 103);
    expect(await items.last().textContent()).toContain("hook 102");
    expect(await page.getByRole("button", { name: "Show more webhooks" }).count()).toBe(0);
  });
});
