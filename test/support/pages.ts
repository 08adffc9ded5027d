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
