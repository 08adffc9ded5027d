// The hosted pages in a real browser: building them from the current sources, and "devices":
// a browser context of their own (own sessionStorage) with a CDP virtual authenticator that keeps
// discoverable passkeys, as a phone or laptop would.
import { fileURLToPath } from "node:url";
import type { Browser, BrowserContext, CDPSession, Page } from "playwright-core";

const PAGES_CONFIG = fileURLToPath(new URL("../../pages/vite.config.ts", import.meta.url));

/**
 * Builds pages/dist from the current sources (what `npm run pages:build` does): once per run, in
 * test/support/global-setup.ts, before any file serves it.
 */
export async function buildPages(): Promise<void> {
  const { build } = await import("vite");
  await build({ configFile: PAGES_CONFIG, logLevel: "warn" });
}

export type VirtualCredential = { credentialId: string; isResidentCredential: boolean; rpId: string; userHandle?: string; signCount: number };

export type Device = {
  context: BrowserContext;
  page: Page;
  /** every URL the device's pages requested */
  requests: string[];
  /** console errors and uncaught exceptions (a CSP violation shows up here) */
  problems: string[];
  /** the passkeys its authenticator holds */
  credentials(): Promise<VirtualCredential[]>;
  close(): Promise<void>;
};

export async function openDevice(browser: Browser, viewport = { width: 1280, height: 900 }): Promise<Device> {
  const context = await browser.newContext({ viewport });
  const requests: string[] = [];
  const problems: string[] = [];
  context.on("request", (r) => requests.push(r.url()));
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  // A navigation starts a renderer and loads the page's modules from the in-process server: 1.1 s
  // cold with nothing else running here, and past 10 s in a full CI run on a slow 2-core machine
  // (both test workers, Postgres and Chromium busy), where the first /login of a new device timed
  // out and every later step of its story failed with it. Steps keep their 10 s.
  page.setDefaultNavigationTimeout(30_000);
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(m.text());
  });
  page.on("pageerror", (e) => problems.push(String(e)));
  const cdp: CDPSession = await context.newCDPSession(page);
  await cdp.send("WebAuthn.enable");
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: { protocol: "ctap2", transport: "internal", hasResidentKey: true, hasUserVerification: true, isUserVerified: true },
  });
  return {
    context,
    page,
    requests,
    problems,
    async credentials() {
      return (await cdp.send("WebAuthn.getCredentials", { authenticatorId })).credentials as VirtualCredential[];
    },
    close: () => context.close(),
  };
}
