// The dashboard in a real browser (Debian's Chromium via playwright-core)
// against a whole app on a loopback port, a delivery worker and a real receiver: what an owner and
// support staff do, checked on the page, at the receiver and in the database; every control used
// from the keyboard, nothing wider than a phone, no request leaving the origin and no CSP
// violation. Screenshots at desktop and phone widths when LINKGATE_TEST_SCREENSHOTS names a folder
// (test/support/browser.ts).
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Hono } from "hono";
import type { Browser, Page, Request as PwRequest } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWorker, type DeliveryWorker } from "../src/delivery/worker.ts";
import { FILTER_LOOKBACK } from "../src/graphql/schema/delivery.ts";
import { dashboardRoutes } from "../src/http/routes/dashboard.ts";
import { verifyWebhook } from "../src/webhooks/receiver.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { chromiumMissing, launchChromium, listen, recordProblems, screenshots } from "./support/browser.ts";
import { eventually, TestReceiver } from "./support/receiver.ts";

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
    const text = await res.text();
    expect(text).toContain("npm run dashboard:build");
    // an image built with --omit=dev has no vite: the answer says how to build one that has them
    expect(text).toContain("npm prune --omit=dev");
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
  const requests: string[] = [];
  const problems: string[] = [];

  beforeAll(async () => {
    shots = screenshots("linkgate-dashboard");
    // more than a page of webhooks (100): more than a project holds by default
    h = await startHarness("pglite", { env: { LINKGATE_WEBHOOK_RETRY_SCHEDULE_MS: "100,100,100,100,100", LINKGATE_WEBHOOKS_PER_PROJECT: "110" } });
    server = await listen(h.app.fetch);
    worker = startWorker({ db: h.db, config: h.config, masterKey: h.app.deps.master, pollMs: 50 });
    receiver = await TestReceiver.start();
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(10_000);
    // Every request of the page and its workers, every console error and CSP violation.
    page.context().on("request", (r: PwRequest) => requests.push(r.url()));
    await recordProblems(page, problems);
    await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: server.url });
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

  /**
   * Waits for the worker to give up on the event's delivery (six attempts, each a claim and a
   * record on PGlite in this process), then returns it in the log, which the page polls every
   * 2 s. The worker's pace is not what these tests are about: at the start of the suite, beside
   * another file and Chromium on two cores, the six attempts alone have outlasted the page's
   * 10 s for one step.
   */
  async function failedDelivery(eventId: string) {
    await eventually(() => h.db.prisma.delivery.findFirst({ where: { eventId, status: "failed" } }), 45_000, `the worker to fail ${eventId}`);
    return delivery(eventId, "failed");
  }

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
    // 500 emoji are 500 characters (docs/webhooks.md): the field took 250
    await page.getByLabel("Description").fill("📦".repeat(500));
    expect(await page.getByLabel("Description").inputValue()).toBe("📦".repeat(500));
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
    const failed = await failedDelivery(eventId);
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
    await (await failedDelivery(eventId)).waitFor();
    receiver.setFallback({ status: 200 });
    await page.getByRole("button", { name: "Replay failed" }).click();
    await page.getByText("1 failed delivery queued again.").waitFor();
    await delivery(eventId, "succeeded").waitFor();
  });


  // ---- what was sent, charts, users ------------------------------------------------------------

  /** Tabs through the page from the top; fails unless every visible control got the focus. */
  async function everyControlTakesTheFocus(view: string) {
    // Start from the top: the page's heading takes the focus for a moment (a blur alone would
    // leave the browser's starting point where the focus was).
    await page.evaluate(() => {
      document.querySelectorAll("[data-reached]").forEach((el) => el.removeAttribute("data-reached"));
      const top = document.querySelector<HTMLElement>("header h1")!;
      top.tabIndex = -1;
      top.focus();
      top.removeAttribute("tabindex");
    });
    // Visible, enabled controls not reached yet (content of a closed <details> is not visible).
    const unreached = () =>
      page.evaluate(() =>
        [...document.querySelectorAll<HTMLElement>("a[href], button, input, select, textarea, summary, [tabindex]:not([tabindex='-1'])")]
          .filter((el) => !(el as HTMLButtonElement).disabled && el.checkVisibility({ visibilityProperty: true }) && !el.hasAttribute("data-reached"))
          .map((el) => el.outerHTML.slice(0, 120)),
      );
    const count = (await unreached()).length;
    expect(count, view).toBeGreaterThan(3);
    // Scrolling boxes take a Tab stop of their own too: up to three presses a control.
    for (let i = 0; i < 3 * count && (i < count || (await unreached()).length > 0); i++) {
      await page.keyboard.press("Tab");
      await page.evaluate(() => document.activeElement?.setAttribute("data-reached", ""));
    }
    const missed = await unreached();
    expect(missed, `${view}: controls the keyboard never reached`).toEqual([]);
  }

  /** Nothing is wider than the viewport (only scrolling boxes such as <pre> may hold wider content). */
  async function fitsTheWidth(view: string) {
    const { width, scroll, wide } = await page.evaluate(() => {
      const width = document.documentElement.clientWidth;
      const wide = [...document.querySelectorAll<HTMLElement>("body *")]
        .filter((el) => {
          const r = el.getBoundingClientRect();
          if (r.width === 0 || r.right <= width + 1) return false;
          for (let p = el.parentElement; p; p = p.parentElement) if (["auto", "scroll", "hidden"].includes(getComputedStyle(p).overflowX)) return false;
          return true;
        })
        .map((el) => el.outerHTML.slice(0, 100));
      return { width, scroll: document.documentElement.scrollWidth, wide };
    });
    expect(scroll, view).toBeLessThanOrEqual(width);
    expect(wide, view).toEqual([]);
  }

  const webhookIdOnPage = () => page.evaluate(() => location.hash.replace("#/webhooks/", ""));
  const totals = (root: string) =>
    page.evaluate(
      (sel) =>
        Object.fromEntries(
          [...document.querySelectorAll(`${sel} [data-total]`)].map((el) => [el.getAttribute("data-total"), el.textContent]),
        ) as Record<string, string>,
      root,
    );

  it("shows what was sent: the envelope pretty and foldable, the exact bytes signed, copied from the keyboard", async () => {
    const eventId = sent[0];
    const row = page.locator(`li.delivery[data-event-id="${eventId}"]`);
    const summary = row.locator("details.payload > summary");
    await summary.focus();
    await page.keyboard.press("Enter");
    const envelope = row.locator("details.payload [data-json]");
    await envelope.waitFor();
    const got = await receiptOf(eventId);
    const body = got.body.toString("utf8");
    // Pretty: every key of the envelope on a line of its own, nested objects indented.
    for (const key of ["id", "event_type", "created_at", "project_id", "data", "test"]) {
      expect(await envelope.locator(".json-key", { hasText: `"${key}"` }).count(), key).toBeGreaterThan(0);
    }
    // Folding: the summary of `data` closes it from the keyboard, and opens it again.
    const data = envelope.locator("details.json-node", { has: page.locator(":scope > summary .json-key", { hasText: '"data"' }) }).first();
    await data.locator(":scope > summary").focus();
    await page.keyboard.press("Enter");
    expect(await data.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(false);
    expect(await data.locator(":scope > summary").textContent()).toMatch(/"data": \{ \d+ keys? …\}/);
    await shots.take(page, "envelope-folded");
    await page.keyboard.press("Space");
    expect(await data.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(true);

    // The exact bytes: what the receiver got, byte for byte, and said to be what was signed.
    const signed = row.locator("details.signed");
    await signed.locator("summary").focus();
    await page.keyboard.press("Enter");
    expect(await signed.locator("[data-signed-bytes]").textContent()).toBe(body);
    expect(await signed.locator("summary").textContent()).toBe(`Exact bytes signed (${Buffer.byteLength(body)} bytes)`);
    expect(await signed.textContent()).toMatch(/X-Service-Signature is the HMAC-SHA256 of exactly these bytes/);

    // Copy, from the keyboard: the clipboard holds the exact bytes.
    await row.getByRole("button", { name: `Copy the envelope of event ${eventId}` }).focus();
    await page.keyboard.press("Enter");
    await row.getByText("Copied the envelope's exact bytes.").waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(body);

    // Each attempt says what webhook-signature signed: the id and its timestamp, then the bytes.
    await row.locator("details.log > summary").click();
    const ts = got.headers["webhook-timestamp"] as string;
    expect(await row.locator("details.attempt").first().textContent()).toContain(`${eventId}.${ts}.`);
    await shots.take(page, "envelope");
  });

  it("finds a delivery by its event id, and says when the project has no such event", async () => {
    const eventId = sent[2];
    const search = page.getByLabel("Find by event id");
    await search.focus();
    await page.keyboard.type(eventId);
    await page.keyboard.press("Enter");
    await page.waitForFunction(
      (id) => [...document.querySelectorAll("li.delivery")].map((li) => li.getAttribute("data-event-id")).join() === id,
      eventId,
    );
    expect(await page.getByRole("status").filter({ hasText: "Showing the delivery of event" }).textContent()).toContain(eventId);
    expect(await page.getByLabel("Show status").isDisabled()).toBe(true);
    await shots.take(page, "event-search");

    await search.fill("evt_nothing_like_it");
    await page.keyboard.press("Enter");
    await page.getByText("This project has no event evt_nothing_like_it.").waitFor();
    expect(await page.locator("li.delivery").count()).toBe(0);

    await search.fill("  ");
    await page.keyboard.press("Enter");
    expect(await page.locator("#event-search-error").textContent()).toContain("Enter an event id");
    expect(await search.evaluate((el) => el === document.activeElement)).toBe(true);

    await page.getByRole("button", { name: "Show all deliveries" }).focus();
    await page.keyboard.press("Enter");
    await page.waitForFunction((n) => document.querySelectorAll("li.delivery").length === n, sent.length);
    expect(await search.evaluate((el) => el === document.activeElement)).toBe(true);
  });

  it("charts the webhook's attempts: succeeded, retried and failed, and the latency, over 24 hours and 7 days", async () => {
    // So far: four deliveries succeeded at once or after a redelivery or replay; two failed all
    // six attempts first (five retried, then failed).
    const expected = { succeeded: "4", retried: "10", failed: "2" };
    const chart = '[data-chart]:not([data-chart="project"])';
    await page.waitForFunction(
      ([sel, want]) => {
        const got = Object.fromEntries([...document.querySelectorAll(`${sel} [data-total]`)].map((el) => [el.getAttribute("data-total"), el.textContent]));
        return Object.entries(want).every(([k, v]) => got[k] === v);
      },
      [chart, expected] as const,
    );
    const day = await totals(chart);
    expect(day.p50).toMatch(/^\d{1,3}(,\d{3})* ms$/);
    expect(day.p95).toMatch(/^\d{1,3}(,\d{3})* ms$/);
    expect(await page.locator(`${chart} svg.bars rect.bar-ok`).count()).toBeGreaterThan(0);
    expect(await page.locator(`${chart} svg.bars rect.bar-retry`).count()).toBeGreaterThan(0);
    expect(await page.locator(`${chart} svg.bars rect.bar-fail`).count()).toBeGreaterThan(0);
    expect(await page.locator(`${chart} svg.latency polyline.line-p50`).count()).toBeGreaterThan(0);
    expect(await page.locator(`${chart} svg.bars`).getAttribute("aria-label")).toContain("4 succeeded, 10 retried, 2 failed");
    // The numbers as a table, opened from the keyboard: 24 hours.
    const table = page.locator(`${chart} details.chart-table`);
    await table.locator("summary").focus();
    await page.keyboard.press("Enter");
    expect(await table.locator("tbody tr").count()).toBe(24);
    await shots.take(page, "webhook-chart-day");

    const week = page.locator(chart).getByRole("button", { name: "7 days" });
    await week.focus();
    await page.keyboard.press("Space");
    await page.locator(`${chart}[data-range="week"]`).waitFor();
    expect(await week.getAttribute("aria-pressed")).toBe("true");
    expect(await table.locator("tbody tr").count()).toBe(28);
    expect(await totals(chart)).toMatchObject(expected);
    await shots.take(page, "webhook-chart-week");
    // Plain SVG and the style sheet: not one style attribute on the page (the CSP allows none;
    // an empty one, which the browser leaves on inputs it has filled, sets nothing).
    expect(await page.evaluate(() => [...document.querySelectorAll("[style]")].filter((el) => el.getAttribute("style") !== "").length)).toBe(0);

    // The project's overview shows the same across all webhooks (one, here).
    await page.getByRole("link", { name: "Webhooks", exact: true }).focus();
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => location.hash === "#/");
    await page.waitForFunction(
      (want) => {
        const got = Object.fromEntries([...document.querySelectorAll(`[data-chart="project"] [data-total]`)].map((el) => [el.getAttribute("data-total"), el.textContent]));
        return Object.entries(want).every(([k, v]) => got[k] === v);
      },
      expected,
    );
    await shots.take(page, "overview-chart");
    await everyControlTakesTheFocus("overview");
    await page.getByRole("link", { name: /local receiver/ }).click();
    await page.locator("#detail-title").waitFor();
    await everyControlTakesTheFocus("webhook");
  });

  describe("users, for support staff", () => {
    const adaEmail = "ada.console@example.com";
    const adaPhone = "+12025550181";
    const bobPhone = "+12025550182";
    let ada = { token: "", accountId: "" };
    let bob = { token: "", accountId: "" };

    beforeAll(async () => {
      // Ada signs up, adds a phone nobody had (attached), then Bob's (Bob is merged into her).
      ada = await h.signIn({ email: adaEmail });
      bob = await h.signIn({ phone: bobPhone });
      for (const phone of [adaPhone, bobPhone]) {
        const start = await h.call("POST", "/users/link/request", { body: { phone }, headers: { authorization: `Bearer ${ada.token}` } });
        const verify = await h.call("POST", "/users/link/verify", {
          body: { state_id: start.body.state_id, otp: await h.mailbox.otp(phone) },
          headers: { authorization: `Bearer ${ada.token}` },
        });
        expect(verify.status).toBe(200);
      }
    });

    const lookUp = async (text: string) => {
      const field = page.getByLabel("E-mail address, phone number or account id");
      await field.fill(text);
      await field.press("Enter");
    };

    it("looks an account up by e-mail and shows its identifiers, merge, sessions, passkeys and recent events with deliveries", async () => {
      await page.getByRole("link", { name: "Users", exact: true }).focus();
      await page.keyboard.press("Enter");
      await page.getByRole("heading", { name: "Users", exact: true }).waitFor();
      await shots.take(page, "users");

      // 32nd review: a link with malformed percent-encoding blanked the console (an uncaught
      // URIError); it shows the webhooks instead, and the problems checked last stay empty
      for (const link of ["#/users/%E0", "#/webhooks/%"]) {
        await page.goto(`${server.url}/dashboard${link}`);
        await page.locator('main.layout[data-view="home"]').waitFor();
      }
      await page.goto(`${server.url}/dashboard#/users`);
      await page.getByRole("heading", { name: "Users", exact: true }).waitFor();

      await lookUp("nobody@example.com");
      await page.getByText("No account of this project has nobody@example.com.").waitFor();
      await lookUp("12345");
      const err = page.locator("#account-search-error");
      await err.waitFor();
      expect(await err.textContent()).toMatch(/E\.164|\+ and country code/);
      expect(await page.getByLabel("E-mail address, phone number or account id").evaluate((el) => el === document.activeElement)).toBe(true);

      await lookUp(adaEmail.toUpperCase());
      await page.waitForFunction((id) => location.hash === `#/users/${id}`, ada.accountId);
      const account = page.locator(`section.account[data-account-id="${ada.accountId}"]`);
      await account.waitFor();
      const ids = await account.locator("#identifiers-title + ul li").allTextContents();
      expect(ids[0]).toMatch(new RegExp(`E-mail ${adaEmail.replace(/[.]/g, "\\.")} own`));
      expect(ids[1]).toMatch(/Phone \+12025550181 attached/);
      const merge = await account.locator("section[aria-labelledby='merge-title']").textContent();
      expect(merge).toContain("This account is the primary");
      expect(merge).toContain(bob.accountId);
      expect(merge).toContain(bobPhone);
      expect(await account.locator("section[aria-labelledby='sessions-title'] li").count()).toBeGreaterThanOrEqual(1);
      expect(await account.locator("section[aria-labelledby='passkeys-title']").textContent()).toContain("No passkeys.");
      const types = await account.locator("li.event .etype").allTextContents();
      expect(types).toEqual(expect.arrayContaining(["user.merged", "user.identifier.linked", "user.created", "user.authentication.success"]));
      // Each event with its delivery to the webhook (subscribed to every type).
      const created = account.locator("li.event", { has: page.locator(".etype", { hasText: /^user\.created$/ }) });
      await created.getByRole("link", { name: receiver.url }).waitFor();
      await created.locator("details.payload > summary").focus();
      await page.keyboard.press("Enter");
      expect(await created.locator("[data-json]").textContent()).toContain(ada.accountId);
      await shots.take(page, "account");
      await everyControlTakesTheFocus("account");

      // The partner's link shows Bob, the secondary.
      await account.getByRole("link", { name: bob.accountId }).focus();
      await page.keyboard.press("Enter");
      await page.locator(`section.account[data-account-id="${bob.accountId}"]`).waitFor();
      expect(await page.locator("section[aria-labelledby='merge-title']").textContent()).toContain("This account is the secondary");
      await lookUp(adaPhone);
      await page.locator(`section.account[data-account-id="${ada.accountId}"]`).waitFor();
    });

    it("ends all of the account's sessions after a confirmation", async () => {
      const opener = page.getByRole("button", { name: "End all sessions…" });
      await opener.focus();
      await page.keyboard.press("Enter");
      // The question takes the focus on its safe choice; Cancel gives it back to the button.
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Cancel");
      expect(await page.locator("#end-sessions-text").textContent()).toContain(ada.accountId);
      await page.keyboard.press("Enter");
      expect(await opener.evaluate((el) => el === document.activeElement)).toBe(true);

      await page.keyboard.press("Enter");
      await page.keyboard.press("Shift+Tab");
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("End all sessions");
      await page.keyboard.press("Enter");
      await page.getByText(/sessions? ended: (it is|they are) signed out on (its|their) next request\./).waitFor();
      expect(await page.evaluate(() => document.activeElement?.textContent)).toMatch(/ended/);
      await page.getByText("No live sessions: nobody is signed in to this account.").waitFor();
      const r = await h.gql(`{ viewer { id } }`, {}, { authorization: `Bearer ${ada.token}` });
      expect(r.body.errors?.[0]?.extensions?.code).toBe("UNAUTHENTICATED");
    });

    it("unmerges for the user after a confirmation naming both accounts; user.unmerged records that support did it", async () => {
      await page.getByRole("button", { name: "Unmerge…" }).focus();
      await page.keyboard.press("Enter");
      const question = await page.locator("#unmerge-text").textContent();
      expect(question).toContain(`${ada.accountId} (${adaEmail})`);
      expect(question).toContain(`${bob.accountId} (${bobPhone})`);
      await shots.take(page, "confirm-unmerge");
      await page.keyboard.press("Shift+Tab");
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Unmerge the accounts");
      await page.keyboard.press("Enter");
      await page.getByText(/Accounts separated/).waitFor();
      await page.getByText("Not merged with another account.").waitFor();
      const unmerged = await h.db.prisma.outboxEvent.findFirstOrThrow({ where: { eventType: "user.unmerged", body: { contains: ada.accountId } } });
      expect(JSON.parse(unmerged.body).data).toMatchObject({ primary_user_id: ada.accountId, secondary_user_id: bob.accountId, by: "support" });
      await page.locator("li.event .etype", { hasText: "user.unmerged" }).waitFor();
    });

    it("at 1440 px, the Look up button says so on one line, as tall as the other buttons", async () => {
      await page.setViewportSize({ width: 1440, height: 900 });
      const lookUpButton = page.getByRole("button", { name: "Look up", exact: true });
      await lookUpButton.waitFor();
      // The text's line boxes: one line means every box shares its top.
      const tops = await lookUpButton.evaluate((el) => {
        const range = document.createRange();
        range.selectNodeContents(el);
        return [...range.getClientRects()].map((r) => Math.round(r.top));
      });
      expect(new Set(tops).size, `line tops ${tops.join(", ")}`).toBe(1);
      const height = (await lookUpButton.boundingBox())!.height;
      expect(height).toBe((await page.getByRole("button", { name: "Forget API key" }).boundingBox())!.height);
      await shots.take(page, "users-1440");
      await page.setViewportSize({ width: 1280, height: 900 });
    });

    it("is readable at phone width, nothing overflowing", async () => {
      await page.setViewportSize({ width: 390, height: 844 });
      await fitsTheWidth("account, phone");
      await shots.take(page, "phone-account");
      await page.getByRole("link", { name: "Webhooks", exact: true }).click();
      await page.locator('[data-chart="project"] [data-total]').first().waitFor();
      await fitsTheWidth("overview, phone");
      await shots.take(page, "phone-overview");
      await page.getByRole("link", { name: /local receiver/ }).click();
      await page.locator('[data-chart]:not([data-chart="project"]) [data-total]').first().waitFor();
      const first = page.locator("li.delivery").first();
      await first.locator("details.payload > summary").click();
      await first.locator("details.signed > summary").click();
      await fitsTheWidth("webhook with an envelope open, phone");
      await shots.take(page, "phone-webhook-chart");
      await page.setViewportSize({ width: 1280, height: 900 });
      await fitsTheWidth("webhook, desktop");
    });
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

  it("registers a sign-in app, shows its redirect URI, its secret once, and rotates it", async () => {
    await page.getByRole("link", { name: "Sign-in apps", exact: true }).click();
    // 100 emoji are a name of 100 characters (docs/security.md, "Input, tenants and pages"): the
    // field counted UTF-16 units and kept 50 of them
    await page.getByLabel("Name").fill("🚀".repeat(100));
    expect(await page.getByLabel("Name").inputValue()).toBe("🚀".repeat(100));
    await page.getByLabel("Name").fill("Acme server");
    await page.getByLabel("Redirect URIs").fill("https://acme.example/callback");
    await page.getByLabel(/Confidential/).check();
    await page.getByRole("button", { name: "Register the app" }).click();
    const first = await page.getByRole("textbox", { name: "Client secret", exact: true }).inputValue();
    expect(first).toMatch(/^lgcs_/);
    const item = page.locator("li.app-item", { hasText: "Acme server" });
    await expect.poll(() => item.textContent()).toContain("https://acme.example/callback");
    const stored = await h.db.prisma.oAuthClient.findFirstOrThrow({ where: { name: "Acme server" } });
    expect(await item.textContent()).toContain(stored.clientId);
    await page.getByRole("button", { name: "I stored it" }).click();
    page.once("dialog", (d) => void d.accept());
    await item.getByRole("button", { name: "Rotate the secret of Acme server" }).click();
    await expect.poll(() => page.getByRole("textbox", { name: "Client secret", exact: true }).inputValue()).not.toBe(first);
    await shots.take(page, "sign-in-apps");
    await page.getByRole("button", { name: "I stored it" }).click();
    await page.getByRole("link", { name: "Webhooks", exact: true }).click();
  });

  it("adds a sign-in provider, shows the callback URL to register, edits it and deletes it after a confirmation", async () => {
    await page.getByRole("link", { name: "Sign-in providers", exact: true }).click();
    await page.getByText("No sign-in providers yet.").waitFor();
    const form = page.getByRole("form", { name: "Add a sign-in provider" });
    // any OpenID Connect provider needs its issuer: the form says so before asking the API
    // (a preset's issuer would be resolved in DNS, which tests never ask; this one is loopback)
    await form.getByLabel("Provider").selectOption("OIDC");
    await form.getByLabel("Button name").fill("Acme SSO");
    await form.getByLabel("Slug").fill("acme-sso");
    await form.getByLabel("Client id").fill("acme-client");
    await form.getByLabel("Client secret").fill("acme-secret");
    await form.getByRole("button", { name: "Add the provider" }).click();
    await form.getByText("Enter the issuer URL of Another OpenID Connect provider.").waitFor();
    await form.getByLabel("Issuer URL").fill("http://127.0.0.1:9/sso");
    await form.getByRole("button", { name: "Add the provider" }).click();
    await page.getByRole("status").filter({ hasText: "Added Acme SSO. Register this callback URL at Another OpenID Connect provider" }).waitFor();
    const stored = await h.db.prisma.identityProvider.findFirstOrThrow({ where: { projectId: h.projectId, slug: "acme-sso" } });
    const callback = `${h.app.deps.keys.issuer}/auth/external/${stored.id}/callback`;
    const item = page.locator('li.app-item[data-provider="acme-sso"]');
    await expect.poll(() => item.textContent()).toContain(callback);
    expect(await item.textContent()).toContain("set (never shown)");
    expect(await item.textContent()).toContain("openid email profile");
    expect(stored).toMatchObject({ preset: "oidc", clientId: "acme-client", issuer: "http://127.0.0.1:9/sso" });
    expect(stored.clientSecret).not.toContain("acme-secret"); // sealed

    await item.getByRole("button", { name: "Edit Acme SSO" }).click();
    const edit = item.getByRole("form", { name: "Edit Acme SSO" });
    await edit.getByLabel("Button name").fill("Acme staff");
    await edit.getByRole("button", { name: "Save changes" }).click();
    await page.getByRole("status").filter({ hasText: "Saved Acme staff." }).waitFor();
    await expect.poll(() => item.locator("h3").textContent()).toBe("Acme staff");
    const edited = await h.db.prisma.identityProvider.findUniqueOrThrow({ where: { id: stored.id } });
    // only what changed: the secret left empty is kept
    expect(edited).toMatchObject({ displayName: "Acme staff", clientId: "acme-client", clientSecret: stored.clientSecret });
    await shots.take(page, "sign-in-providers");

    await item.getByRole("button", { name: "Delete Acme staff" }).click();
    // the safe choice has the focus
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Cancel");
    await item.getByRole("button", { name: "Delete provider" }).click();
    await page.getByText("No sign-in providers yet.").waitFor();
    expect(await h.db.prisma.identityProvider.count({ where: { projectId: h.projectId } })).toBe(0);
    await page.getByRole("link", { name: "Webhooks", exact: true }).click();
  });

  it("says when the log's filters looked through the webhook's newest deliveries only", async () => {
    const r = await h.gql(`mutation($input: WebhookInput!) { createWebhook(input: $input) { ... on CreateWebhookPayload { webhook { id } } } }`, {
      input: { url: `${receiver.url}?busy`, events: ["user.created"], description: "busy log" },
    });
    const id: string = r.body.data.createWebhook.webhook.id;
    // a dead endpoint's log, a day old: more failed deliveries than the filters look through
    const n = FILTER_LOOKBACK + 1;
    await h.db.prisma.$executeRaw`
      INSERT INTO outbox_events (id, project_id, event_type, body, created_at)
      SELECT 'evt_busy' || k, ${h.projectId}, 'user.created', '{}', now() - interval '1 day' + k * interval '1 second' FROM generate_series(1, ${n}::int) k`;
    await h.db.prisma.$executeRaw`
      INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type, status, attempts, created_at, completed_at)
      SELECT 'dlv_busy' || k, 'evt_busy' || k, ${id}, ${h.projectId}, 'user.created', 'failed', 6,
             now() - interval '1 day' + k * interval '1 second', now() - interval '1 day' + k * interval '1 second'
      FROM generate_series(1, ${n}::int) k`;
    await page.evaluate((hook) => (location.hash = `#/webhooks/${hook}`), id);
    await page.locator("li.delivery").first().waitFor();
    expect(await page.locator("[data-lookback]").count()).toBe(0);
    await page.getByLabel("Show status").selectOption("succeeded");
    await page.getByText("No deliveries match these filters.").waitFor();
    expect(await page.locator("[data-lookback]").textContent()).toContain(`newest ${FILTER_LOOKBACK.toLocaleString("en")} deliveries only`);
    await page.getByLabel("Show status").selectOption("failed");
    await page.locator("li.delivery").first().waitFor();
    await page.waitForFunction(() => !document.querySelector("[data-lookback]"));
    await page.getByLabel("Show status").selectOption("");
    await page.getByRole("link", { name: "Webhooks", exact: true }).click();
  });

  it("made no request to another origin, and nothing broke the page's CSP", async () => {
    const origin = new URL(server.url).origin;
    expect(requests.length).toBeGreaterThan(0);
    expect(requests.filter((u) => !u.startsWith("data:") && new URL(u).origin !== origin)).toEqual([]);
    expect(problems.filter((p) => !/status of 4\d\d/.test(p))).toEqual([]);
  });
});
