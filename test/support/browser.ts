// Browser tests: Debian's Chromium driven by playwright-core, the app on a real loopback port,
// and the dashboard built from its current sources.
import { existsSync, mkdirSync, mkdtempSync } from "node:fs";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { serve } from "@hono/node-server";
import { chromium, type Browser, type Page } from "playwright-core";

/** Debian's `chromium` package; CHROMIUM_PATH overrides. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const chromiumMissing = existsSync(CHROMIUM_PATH) ? null : `${CHROMIUM_PATH} not found (install Debian's chromium package)`;

/**
 * `backForwardCache`: keep the back/forward cache every user's browser has, which playwright
 * turns off by default (--disable-back-forward-cache), for a test of what Back brings back.
 */
export function launchChromium(options: { backForwardCache?: boolean } = {}): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    ...(options.backForwardCache ? { ignoreDefaultArgs: ["--disable-back-forward-cache"] } : {}),
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

const DASHBOARD_CONFIG = fileURLToPath(new URL("../../dashboard/vite.config.ts", import.meta.url));

/**
 * Builds dashboard/dist from the current sources (what `npm run dashboard:build` does): once per
 * run, in test/support/global-setup.ts, before any file serves it.
 */
export async function buildDashboard(): Promise<void> {
  const { build } = await import("vite");
  await build({ configFile: DASHBOARD_CONFIG, logLevel: "warn" });
}

/**
 * Records in `problems` what a page must not do: a console error, an uncaught error, a
 * Content-Security-Policy violation (reported through a binding, as the page sees it).
 */
export async function recordProblems(page: Page, problems: string[]): Promise<void> {
  page.on("console", (m) => m.type() === "error" && problems.push(`console: ${m.text()}`));
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  await page.exposeBinding("reportViolation", (_source, v: string) => problems.push(`CSP: ${v}`));
  await page.addInitScript(() =>
    document.addEventListener("securitypolicyviolation", (e) =>
      (window as unknown as { reportViolation(v: string): void }).reportViolation(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`),
    ),
  );
}

/** Serves a fetch handler on 127.0.0.1 and an ephemeral port. */
export async function listen(fetch: (req: Request) => Promise<Response>): Promise<{ url: string; close(): Promise<void> }> {
  const { server, port } = await new Promise<{ server: ReturnType<typeof serve>; port: number }>((resolve) => {
    const server = serve({ fetch, port: 0, hostname: "127.0.0.1" }, (info: AddressInfo) => resolve({ server, port: info.port }));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

/** Where screenshots go when someone wants to look at them (README, "Running on Postgres", on the tests). */
const SCREENSHOTS_ENV = "LINKGATE_TEST_SCREENSHOTS";

/**
 * Full-page screenshots at the moments a browser test names, into a new folder inside the one
 * LINKGATE_TEST_SCREENSHOTS names, for a person to look at. Without it none is taken: a run's
 * temporary folders are removed when it ends (test/support/global-setup.ts), so they were thrown
 * away unseen, and each cost Chromium about 0.4 s of CPU here (the dashboard's 27: 68 to 71 s of
 * the machine's CPU for its file with them, 58 s without, alternating, on a 2-core machine).
 * The layout checks that go with them (nothing wider than the window) run either way.
 */
export function screenshots(prefix: string) {
  const root = process.env[SCREENSHOTS_ENV];
  if (root) mkdirSync(path.resolve(root), { recursive: true });
  const dir = root ? mkdtempSync(path.join(path.resolve(root), `${prefix}-`)) : null;
  const taken: string[] = [];
  let n = 0;
  return {
    dir,
    taken,
    async take(page: Page, name: string): Promise<void> {
      if (!dir) return;
      const file = path.join(dir, `${String(++n).padStart(2, "0")}-${name}.png`);
      await page.screenshot({ path: file, fullPage: true });
      taken.push(file);
    },
  };
}
