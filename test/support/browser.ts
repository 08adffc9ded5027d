// Browser tests: Debian's Chromium driven by playwright-core, the app on a real loopback port,
// and the dashboard built from its current sources.
import { existsSync, mkdtempSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { serve } from "@hono/node-server";
import { chromium, type Browser, type Page } from "playwright-core";

/** Debian's `chromium` package; CHROMIUM_PATH overrides. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const chromiumMissing = existsSync(CHROMIUM_PATH) ? null : `${CHROMIUM_PATH} not found (install Debian's chromium package)`;

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
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

/** Full-page screenshots into one temporary folder per run. */
export function screenshots(prefix: string) {
  const dir = mkdtempSync(path.join(tmpdir(), `${prefix}-`));
  const taken: string[] = [];
  let n = 0;
  return {
    dir,
    taken,
    async take(page: Page, name: string): Promise<string> {
      const file = path.join(dir, `${String(++n).padStart(2, "0")}-${name}.png`);
      await page.screenshot({ path: file, fullPage: true });
      taken.push(file);
      return file;
    },
  };
}
