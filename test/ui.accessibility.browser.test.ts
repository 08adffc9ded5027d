// The hosted pages against WCAG 2.2 AA in Debian's Chromium: axe-core (injected through the
// DevTools protocol, which the pages' CSP does not apply to) on every state a user can meet, in
// the light and the dark colour scheme, with no violation of a WCAG 2.x A/AA rule allowed; each
// state also reflows at 320 CSS px (what 400 % zoom of a 1280 px window is) and has a title of its
// own. What axe cannot see is checked by hand for the sign-in by code: the keyboard alone goes
// through it in order, every stop shows where the focus is, nothing traps it, and a refused code
// is said, tied to the field and given the focus (docs/accessibility.md).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Hono } from "hono";
import * as client from "openid-client";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.ts";
import { hostedPageRoutes } from "../src/http/routes/pages.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { chromiumMissing, launchChromium, listen } from "./support/browser.ts";
import { backends } from "./support/db.ts";
import { authorizationUrl, registerClient, type RegisteredClient } from "./support/oidc.ts";
import { openDevice, type Device } from "./support/pages.ts";
import { TestReceiver } from "./support/receiver.ts";
import { startUpstreamOidc, type UpstreamOidc } from "./support/upstream.ts";

const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
const WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"];

type Violation = { id: string; impact: string | null; help: string; nodes: { target: unknown[]; failureSummary?: string }[] };

/** axe's WCAG 2.x A/AA violations on the page as it is now, in words a failing test can show. */
async function axeViolations(page: Page): Promise<string[]> {
  if (!(await page.evaluate(() => "axe" in window))) await page.evaluate(AXE);
  const violations = await page.evaluate(async (tags) => {
    const axe = (window as unknown as { axe: { run(ctx: Document, opts: unknown): Promise<{ violations: Violation[] }> } }).axe;
    const result = await axe.run(document, { runOnly: { type: "tag", values: tags }, resultTypes: ["violations"] });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target, failureSummary: n.failureSummary })) }));
  }, WCAG_AA);
  return violations.flatMap((v) => v.nodes.map((n) => `${v.id} (${v.impact}): ${v.help} at ${JSON.stringify(n.target)}: ${n.failureSummary ?? ""}`));
}

/**
 * The state on screen meets WCAG 2.2 AA as far as axe can tell, in both colour schemes; it has
 * the title `title`; at 320 px wide nothing needs scrolling sideways (WCAG 1.4.10).
 */
async function check(page: Page, state: string, title: string | RegExp) {
  expect(await page.title(), state).toMatch(title);
  for (const colorScheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme });
    expect(await axeViolations(page), `${state}, ${colorScheme}`).toEqual([]);
  }
  await page.emulateMedia({ colorScheme: null });
  const size = page.viewportSize()!;
  await page.setViewportSize({ width: 320, height: 640 });
  const { scrollWidth, innerWidth } = await page.evaluate(() => ({ scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth }));
  expect(scrollWidth, `${state} at 320 px`).toBeLessThanOrEqual(innerWidth);
  await page.setViewportSize(size);
}

/**
 * Where the focus is: its tag, id and name; whether it is drawn with an outline (2 px or more);
 * and that outline's contrast against what it is drawn on, the nearest opaque background around
 * it (WCAG 1.4.11 asks 3:1). axe does not look at focus.
 */
const focusState = async (page: Page) => {
  const seen = await contrastInPage(page, { property: "outlineColor" });
  return { ...seen, contrast: Math.round(seen.contrast * 100) / 100 };
};

/** The contrast of a field's edge against the card it is on (WCAG 1.4.11: 3:1). */
const edgeContrast = async (page: Page, selector: string) => (await contrastInPage(page, { selector, property: "borderTopColor" })).contrast;

/**
 * One colour of an element (the focused one, without `selector`) against the nearest opaque
 * background around it, and, for the report, which element it is and whether it has an outline
 * of 2 px or more. One function, since the page runs it with nothing of the test's around it.
 */
const contrastInPage = (page: Page, target: { selector?: string; property: "outlineColor" | "borderTopColor" }) =>
  page.evaluate(({ selector, property }) => {
    const el = (selector ? document.querySelector(selector) : document.activeElement) as HTMLElement | null;
    if (!el || el === document.body) return { where: "body", outline: false, contrast: 0 };
    const rgb = (c: string) => c.match(/[\d.]+/g)!.map(Number);
    const luminance = (c: string) => {
      const [r, g, b] = rgb(c).slice(0, 3).map((v) => v / 255).map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4));
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    let under: Element | null = el.parentElement;
    while (under && rgb(getComputedStyle(under).backgroundColor)[3] === 0) under = under.parentElement;
    const background = under ? getComputedStyle(under).backgroundColor : "rgb(255, 255, 255)";
    const s = getComputedStyle(el);
    const [a, b] = [luminance(s[property]), luminance(background)].sort((x, y) => y - x);
    return {
      where: `${el.tagName.toLowerCase()}#${el.id}:${(el.getAttribute("aria-label") ?? el.textContent ?? "").trim()}`,
      outline: s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 2,
      contrast: (a + 0.05) / (b + 0.05),
    };
  }, target);

let browserReady: Promise<Browser> | null = null;
const sharedBrowser = () => (browserReady ??= launchChromium());
afterAll(async () => {
  if (browserReady) await (await browserReady).close();
});

describe.skipIf(chromiumMissing).concurrent.each(backends)("the hosted pages meet WCAG 2.2 AA on %s", (backend) => {
  let h: Harness;
  let origin = "";
  let site: { url: string; close(): Promise<void> };
  let rp: { url: string; close(): Promise<void> };
  let up: UpstreamOidc;
  let thirdParty: RegisteredClient;
  let config: client.Configuration;
  const devices: Device[] = [];
  const email = (who: string) => `${who}-${backend}@example.com`;

  beforeAll(async () => {
    let served: Harness["app"] | null = null;
    site = await listen((req: Request) => (served ? served.fetch(req) : Promise.resolve(new Response("starting", { status: 503 }))));
    origin = site.url.replace("127.0.0.1", "localhost");
    // two code sends per address and identifier in ten minutes, so the third is refused
    h = await startHarness(backend, { env: { LINKGATE_ISSUER: origin, LINKGATE_LIMIT_SENDS_PER_IDENTIFIER_ADDRESS: "2" } });
    served = h.app;
    up = await startUpstreamOidc();
    const created = await h.gql(
      `mutation($input: IdentityProviderInput!) { createIdentityProvider(input: $input) { __typename ... on Error { message } } }`,
      { input: { preset: "OIDC", slug: "upstream", displayName: "Upstream", issuer: up.issuer, clientId: up.clientId, clientSecret: up.clientSecret, scopes: ["openid", "email"] } },
    );
    expect(created.body.data.createIdentityProvider.__typename).toBe("IdentityProvider");
    rp = await listen(async () => new Response("back at the app", { headers: { "content-type": "text/plain" } }));
    thirdParty = await registerClient(h, { type: "CONFIDENTIAL", firstParty: false, name: "Someone else's app", redirectUris: [`${rp.url}/callback`] });
    config = await client.discovery(new URL(origin), thirdParty.clientId, thirdParty.clientSecret!, undefined, { execute: [client.allowInsecureRequests] });
  }, 120_000);
  afterAll(async () => {
    for (const d of devices) await d.close().catch(() => {});
    await up?.stop();
    await rp?.close();
    await site?.close();
    await h?.close();
  });

  async function device(): Promise<Page> {
    const d = await openDevice(await sharedBrowser());
    devices.push(d);
    return d.page;
  }

  async function requestCode(page: Page, identifier: string) {
    await page.getByLabel("E-mail or phone number").fill(identifier);
    await page.getByRole("button", { name: "Send me a code" }).click();
    await page.getByLabel("Code").waitFor();
  }

  async function signUp(page: Page, identifier: string) {
    await page.goto(`${origin}/login`);
    await requestCode(page, identifier);
    await page.getByLabel("Code").fill(await h.mailbox.otp(identifier));
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: /Your account/ }).waitFor();
  }

  async function link(page: Page, identifier: string) {
    await page.getByLabel("E-mail or phone number").fill(identifier);
    await page.getByRole("button", { name: "Send a code" }).click();
    await page.getByLabel("Code").fill(await h.mailbox.otp(identifier));
    await page.getByRole("button", { name: "Verify and add" }).click();
  }

  it.sequential("/login: the start, with a notice, the providers and the passkey button; an empty request; the passkey prompt refused", async () => {
    const page = await device();
    await page.goto(`${origin}/login?why=signed-out`);
    await page.getByRole("button", { name: "Continue with Upstream" }).waitFor();
    await page.getByText("You are signed out.").waitFor();
    await check(page, "login", /^Sign in$/);

    await page.getByRole("button", { name: "Send me a code" }).click();
    await page.getByRole("alert").filter({ hasText: "Enter your e-mail address or phone number." }).waitFor();
    await check(page, "login, nothing typed", /^Error: .*Sign in/);

    // no passkey on this device's authenticator: the browser says no, and the page says so
    await page.getByRole("button", { name: "Sign in with a passkey" }).click();
    await page.locator(".passkey-signin [role=alert]").waitFor();
    // the button, disabled while the browser asked, has the focus back
    await expect.poll(() => page.evaluate(() => document.activeElement?.textContent)).toBe("Sign in with a passkey");
    await check(page, "login, passkey refused", /Sign in/);
  });

  it.sequential("/login: code entry, a wrong code, an expired code, too many codes", async () => {
    const page = await device();
    const who = email("codes");
    await page.goto(`${origin}/login`);
    await requestCode(page, who);
    await check(page, "code entry", /^Enter the code – Sign in$/);

    await page.getByLabel("Code").fill("000000");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator("#code-error").filter({ hasText: "The code is wrong, expired or already used." }).waitFor();
    await check(page, "wrong code", /^Error: Enter the code – Sign in$/);

    await page.getByRole("button", { name: "Use another e-mail or phone" }).click();
    await requestCode(page, who);
    await h.db.prisma.otpState.updateMany({ data: { expiresAt: new Date(Date.now() - 1000) } });
    await page.getByLabel("Code").fill(await h.mailbox.otp(who));
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator("#code-error").filter({ hasText: "The code is wrong, expired or already used." }).waitFor();
    await check(page, "expired code", /^Error: Enter the code – Sign in$/);

    await page.getByRole("button", { name: "Use another e-mail or phone" }).click();
    await page.getByLabel("E-mail or phone number").fill(who);
    await page.getByRole("button", { name: "Send me a code" }).click();
    await page.locator("#identifier-error").filter({ hasText: /too many/i }).waitFor();
    await check(page, "too many codes", /^Error: Sign in$/);
  });

  it.sequential("an app's sign-in: the sign-in card, then a third party's consent", async () => {
    const page = await device();
    const { url } = await authorizationUrl(config, thirdParty);
    await page.goto(url.toString());
    await page.waitForURL(/\/login\?interaction=/);
    await page.getByLabel("E-mail or phone number").waitFor();
    await check(page, "app sign-in", /Sign in/);
    const who = email("consent");
    await requestCode(page, who);
    await page.getByLabel("Code").fill(await h.mailbox.otp(who));
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: /Allow/ }).waitFor();
    await check(page, "consent", /^Allow .*Someone else's app.*\? – Sign in$/);
    // the question has the focus: the code field that had it is gone
    expect(await page.evaluate(() => document.activeElement?.tagName)).toBe("H1");
  });

  it.sequential("/account: several identifiers, a merge, the unmerge question, the confirmation dialog, a refused address", async () => {
    const bob = await device();
    await signUp(bob, email("bob"));
    const page = await device();
    await signUp(page, email("ada"));
    await check(page, "account, new", /Your account/);

    await link(page, email("ada-work"));
    await page.getByRole("status").filter({ hasText: "is now attached" }).waitFor();
    await link(page, "+12025550177");
    await page.getByRole("status").filter({ hasText: "+12025550177 is now attached" }).waitFor();
    await link(page, email("bob"));
    await page.getByRole("status").filter({ hasText: "Merged" }).waitFor();
    await page.getByLabel("Name for the new passkey").fill("Laptop");
    await page.getByRole("button", { name: "Add a passkey" }).click();
    await page.locator('li[data-passkey="Laptop"]').waitFor();
    await check(page, "account, several identifiers and a merge", /Your account/);

    await page.getByRole("button", { name: "Remove +12025550177" }).click();
    await page.getByRole("button", { name: "Remove", exact: true }).waitFor();
    await check(page, "account, remove question", /Your account/);
    await page.getByRole("button", { name: "Cancel" }).click();

    const merged = page.getByRole("region", { name: "Merged account" });
    await merged.getByRole("button", { name: "Unmerge…" }).click();
    await merged.getByRole("group").waitFor();
    await check(page, "account, unmerge question", /Your account/);

    // an hour later the unmerge asks who it is first
    const { accountId } = (await page.evaluate(() => JSON.parse(sessionStorage.getItem("linkgate.session")!))) as { accountId: string };
    await h.db.prisma.session.updateMany({ where: { accountId, endedAt: null }, data: { authTime: new Date(Date.now() - 3_600_000) } });
    await merged.getByRole("button", { name: "Unmerge", exact: true }).click();
    await page.getByRole("dialog", { name: "Confirm it's you" }).waitFor();
    // the unmerge's own "Confirm it is you to go on." stays an error behind the dialog
    await check(page, "account, confirm it's you", /^Error: Confirm it's you – Your account$/);
    await page.getByRole("dialog").getByRole("button", { name: "Cancel" }).click();
    await page.getByRole("dialog").waitFor({ state: "detached" });
    expect(await page.title()).toBe("Error: Your account");

    await page.getByLabel("E-mail or phone number").fill("not an address");
    await page.getByRole("button", { name: "Send a code" }).click();
    await page.locator("#link-identifier-error").waitFor();
    await check(page, "account, a refused address", /^Error: Your account$/);
  });

  it.sequential("/login by code with the keyboard alone: in order, focus always visible, no trap, errors said and focused", async () => {
    const page = await device();
    const who = email("keys");
    await page.goto(`${origin}/login`);
    await page.getByRole("button", { name: "Continue with Upstream" }).waitFor();
    for (const colorScheme of ["light", "dark"] as const) {
      await page.emulateMedia({ colorScheme });
      expect(await edgeContrast(page, "#identifier"), `the field's edge, ${colorScheme}`).toBeGreaterThanOrEqual(3);
    }
    await page.emulateMedia({ colorScheme: null });
    // the field is focused on arrival; Tab walks the page and comes back round to it
    expect((await focusState(page)).where).toMatch(/^input#identifier/);
    const stops: string[] = [];
    for (let i = 0; i < 12; i++) {
      await page.keyboard.press("Tab");
      const f = await focusState(page);
      if (f.where === "body") continue; // the browser's own controls, between the page's end and its start
      expect(f.outline, `focus visible on ${f.where}`).toBe(true);
      expect(f.contrast, `focus ring on ${f.where}`).toBeGreaterThanOrEqual(3);
      stops.push(f.where);
      if (f.where.startsWith("input#identifier")) break;
    }
    expect(stops).toEqual([expect.stringMatching(/^button#:Send me a code/), expect.stringMatching(/^button#:Sign in with a passkey/), expect.stringMatching(/^button#:Continue with Upstream/), expect.stringMatching(/^input#identifier/)]);
    // and back the other way
    await page.keyboard.press("Shift+Tab");
    expect((await focusState(page)).where).toMatch(/^button#:Continue with Upstream/);

    await page.focus("#identifier");
    await page.keyboard.type(who);
    await page.keyboard.press("Enter");
    await page.getByLabel("Code").waitFor();
    const code = page.getByLabel("Code");
    expect((await focusState(page)).where).toMatch(/^input#code/);
    expect(await code.getAttribute("autocomplete")).toBe("one-time-code");
    expect(await code.getAttribute("inputmode")).toBe("numeric");
    // the field's description says where the code went
    const described = (await code.getAttribute("aria-describedby"))!.split(" ");
    const descriptions = await Promise.all(described.map((id) => page.locator(`#${id}`).textContent()));
    expect(descriptions.join(" ")).toContain(who);

    await page.keyboard.type("12345");
    await page.keyboard.press("Enter");
    await page.locator("#code-error").filter({ hasText: "Enter the 6-digit code." }).waitFor();
    expect((await focusState(page)).where).toMatch(/^input#code/);
    expect(await code.getAttribute("aria-invalid")).toBe("true");
    expect(await code.getAttribute("aria-describedby")).toContain("code-error");
    expect(await page.locator("#code-error").getAttribute("role")).toBe("alert");

    await page.keyboard.press("Control+A");
    await page.keyboard.type("000000");
    await page.keyboard.press("Enter");
    await page.locator("#code-error").filter({ hasText: "The code is wrong" }).waitFor();
    expect((await focusState(page)).where).toMatch(/^input#code/);

    // Tab from the field: Sign in, then the way back, each visible
    for (const next of [/^button#:Sign in/, /^button#:Use another e-mail or phone/]) {
      await page.keyboard.press("Tab");
      const f = await focusState(page);
      expect(f.where).toMatch(next);
      expect(f.outline, f.where).toBe(true);
      expect(f.contrast, f.where).toBeGreaterThanOrEqual(3);
    }

    await page.focus("#code");
    await page.keyboard.press("Control+A");
    await page.keyboard.type(await h.mailbox.otp(who));
    await page.keyboard.press("Enter");
    await page.waitForURL(`${origin}/account`);
    await page.getByRole("heading", { name: /Your account/ }).waitFor();
  });
});

describe.skipIf(chromiumMissing)("a hosted page that is not configured meets WCAG 2.2 AA", () => {
  it("says so, titled so", async () => {
    // only the page routes, with no publishable key: the page says what is wrong before it calls anything
    const app = new Hono().route("/", hostedPageRoutes({ ...loadConfig({}), pagesPublishableKey: "" }));
    const server = await listen((req) => Promise.resolve(app.fetch(req)));
    const page = await (await sharedBrowser()).newPage({ viewport: { width: 1280, height: 900 } });
    try {
      for (const p of ["/login", "/account"]) {
        await page.goto(`${server.url}${p}`);
        await page.getByRole("heading", { name: "This page is not configured" }).waitFor();
        await check(page, `${p} not configured`, /^This page is not configured$/);
      }
    } finally {
      await page.close();
      await server.close();
    }
  });
});

// The operator's dashboard: axe on its views, in both colour schemes (one backend: what is on the
// page does not depend on it).
describe.skipIf(chromiumMissing)("the dashboard meets WCAG 2.2 AA as far as axe can tell", () => {
  let h: Harness;
  let server: { url: string; close(): Promise<void> };
  let page: Page;
  let receiver: TestReceiver;

  beforeAll(async () => {
    h = await startHarness("pglite");
    receiver = await TestReceiver.start();
    server = await listen(h.app.fetch);
    page = await (await sharedBrowser()).newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(10_000);
  });
  afterAll(async () => {
    await page?.close();
    await server?.close();
    await receiver?.close();
    await h?.close();
  });

  const axeClean = async (state: string) => {
    for (const colorScheme of ["light", "dark"] as const) {
      await page.emulateMedia({ colorScheme });
      expect(await axeViolations(page), `${state}, ${colorScheme}`).toEqual([]);
    }
    await page.emulateMedia({ colorScheme: null });
  };

  it("the key prompt, a refused key, the webhooks, a new webhook with an error, one webhook, users, apps, providers", async () => {
    await page.goto(`${server.url}/dashboard`);
    const key = page.getByLabel("Project API key");
    await key.waitFor();
    await axeClean("key prompt");
    await key.fill("lg_not_a_key");
    await key.press("Enter");
    await page.locator("#api-key-error").waitFor();
    await axeClean("key refused");
    await key.fill(h.apiKey);
    await key.press("Enter");
    await page.getByRole("heading", { name: "Webhooks", exact: true }).waitFor();
    await axeClean("no webhooks");

    await page.getByRole("link", { name: "New webhook" }).click();
    await page.getByLabel("Endpoint URL").fill("ftp://x");
    await page.getByRole("button", { name: "Select all" }).click();
    await page.getByRole("button", { name: "Create webhook" }).click();
    await page.locator("#new-url-error").waitFor();
    await axeClean("new webhook, refused URL");

    await page.getByLabel("Endpoint URL").fill(receiver.url);
    await page.getByRole("button", { name: "Create webhook" }).click();
    await page.locator("#secret-value").waitFor();
    await axeClean("a webhook and its secret");

    for (const [hash, heading] of [
      ["#/users", "Users"],
      ["#/apps", "Apps"],
      ["#/providers", /provider/i],
    ] as const) {
      await page.goto(`${server.url}/dashboard${hash}`);
      await page.getByRole("heading", { name: heading }).first().waitFor();
      await axeClean(hash);
    }
  });
});
