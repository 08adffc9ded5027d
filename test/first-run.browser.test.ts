// The README's first run, as `npm start` does it: `node dist/main.js` in a child process on a fresh
// data directory (embedded PGlite), with no pages, issuer or transport variable. The address it
// prints is where the hosted pages and passkeys work: in Chromium, with a CDP virtual
// authenticator, a user signs up on /login with the code the development start logs, adds a
// passkey on /account and signs back in with it. A production start says what the pages lack.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256Hex } from "../src/crypto.ts";
import { resolvePagesKey } from "../src/http/routes/pages.ts";
import { closedPort } from "./support/receiver.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { chromiumMissing, launchChromium } from "./support/browser.ts";
import { backends } from "./support/db.ts";
import { openDevice, type Device } from "./support/pages.ts";
import { MAIN, migratedDataDir } from "./support/server-entry.ts";

const ROOT = path.resolve(import.meta.dirname, "..");

type LogLine = { level?: number; msg?: string; [field: string]: unknown };

/** `npm start`'s entry in a child process; `next()` waits for a log line (or the exit). */
class Linkgate {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  output = "";
  readonly lines: LogLine[] = [];
  private waiters: { match: (l: LogLine) => boolean; resolve: (l: LogLine) => void; reject: (e: Error) => void }[] = [];
  private partial = "";
  private exitCode: number | null | undefined;

  constructor(env: Record<string, string>) {
    this.child = spawn(process.execPath, [MAIN], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", LINKGATE_DATA_DIR: migratedDataDir("linkgate-first-run-"), ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child.stdout!.on("data", (c: Buffer) => this.read(String(c)));
    this.child.stderr!.on("data", (c: Buffer) => (this.output += c));
    this.exited = new Promise((resolve) =>
      this.child.on("exit", (code) => {
        this.exitCode = code;
        for (const w of this.waiters.splice(0)) w.reject(new Error(`linkgate exited (${code}) first:\n${this.output}`));
        resolve(code);
      }),
    );
  }

  private read(chunk: string) {
    this.output += chunk;
    const text = this.partial + chunk;
    const complete = text.split("\n");
    this.partial = complete.pop()!;
    for (const raw of complete) {
      let line: LogLine;
      try {
        line = JSON.parse(raw);
      } catch {
        continue; // the keys banner is plain text
      }
      this.lines.push(line);
      this.waiters = this.waiters.filter((w) => (w.match(line) ? (w.resolve(line), false) : true));
    }
  }

  /** The first log line, already logged or still to come, that matches. */
  next(match: (l: LogLine) => boolean): Promise<LogLine> {
    const seen = this.lines.find(match);
    if (seen) return Promise.resolve(seen);
    if (this.exitCode !== undefined) return Promise.reject(new Error(`linkgate exited (${this.exitCode}):\n${this.output}`));
    return new Promise((resolve, reject) => this.waiters.push({ match, resolve, reject }));
  }

  listening(): Promise<LogLine> {
    return this.next((l) => l.msg?.startsWith("linkgate listening on ") ?? false);
  }

  async stop(): Promise<number | null> {
    if (this.exitCode === undefined) this.child.kill("SIGTERM");
    return this.exited;
  }
}

const session = (page: Page) => page.evaluate(() => JSON.parse(sessionStorage.getItem("linkgate.session") ?? "null") as { accountId: string } | null);

describe.skipIf(chromiumMissing)("npm start on a fresh data directory, in Chromium", () => {
  let browser: Browser;
  let lg: Linkgate;
  let device: Device;
  let address = "";
  const email = "ada@example.com";

  beforeAll(async () => {
    const port = await closedPort();
    // `npm start` with nothing set but the port the test can point a browser at.
    lg = new Linkgate({ PORT: String(port) });
    [browser] = await Promise.all([launchChromium(), lg.listening()]);
    address = /linkgate listening on (\S+)/.exec((await lg.listening()).msg!)![1]!;
    device = await openDevice(browser);
  });
  afterAll(async () => {
    await device?.close();
    await browser?.close();
    if (lg) expect(await lg.stop()).toBe(0);
  });

  it("prints a localhost address, which is also the issuer", async () => {
    expect(address).toMatch(/^http:\/\/localhost:\d+$/);
    expect(lg.output).toMatch(/publishable \(front-end apps, safe to ship\): lg_pk_/);
    const discovery = await (await fetch(`${address}/.well-known/openid-configuration`)).json();
    expect(discovery.issuer).toBe(address);
    expect(lg.lines.filter((l) => (l.level ?? 0) >= 40).map((l) => l.msg)).toEqual([]);
  });

  it("serves /login with a publishable key of the project, never a secret one", async () => {
    const html = await (await fetch(`${address}/login`)).text();
    expect(/<meta name="linkgate-publishable-key" content="(lg_pk_[\w-]+)"/.exec(html)?.[1]).toBeTruthy();
    expect(html).not.toContain("lg_sk_");
  });

  it("a user signs up on /login with the logged code, adds a passkey on /account, and signs back in with it", async () => {
    const { page } = device;
    await page.goto(`${address}/login`);
    await page.getByLabel("E-mail or phone number").fill(email);
    await page.keyboard.press("Enter");
    await page.getByLabel("Code").waitFor();
    const sent = await lg.next((l) => l.msg === "message not sent (no transport configured)" && l.to === email);
    await page.getByLabel("Code").fill(String(sent.code));
    await page.keyboard.press("Enter");
    await page.waitForURL(`${address}/account`);
    await page.getByRole("heading", { name: /Your account/ }).waitFor();
    const accountId = (await session(page))!.accountId;
    expect(accountId).toMatch(/^acc_/);

    await page.getByLabel("Name for the new passkey").fill("Laptop");
    await page.getByRole("button", { name: "Add a passkey" }).click();
    await page.getByRole("status").filter({ hasText: "Passkey “Laptop” added" }).waitFor();
    const creds = await device.credentials();
    expect(creds).toHaveLength(1);
    expect(creds[0]).toMatchObject({ isResidentCredential: true, rpId: "localhost" });

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(`${address}/login?why=signed-out`);
    await page.getByRole("button", { name: "Sign in with a passkey" }).click();
    await page.waitForURL(`${address}/account`);
    await page.locator('li[data-passkey="Laptop"]').waitFor();
    expect((await session(page))!.accountId).toBe(accountId);
    expect(device.problems).toEqual([]);
  });
});

describe("a production start and the hosted pages", () => {
  const production = (env: Record<string, string> = {}) =>
    new Linkgate({
      NODE_ENV: "production",
      PORT: "0",
      LINKGATE_WORKER: "0",
      LINKGATE_SECRET_KEY: randomBytes(32).toString("base64"),
      SMTP_URL: "smtp://127.0.0.1:9",
      SMS_WEBHOOK_URL: "http://127.0.0.1:9/sms",
      ...env,
    });
  const pagesWarning = (l: LogLine) => l.level === 40 && (l.msg?.startsWith("the hosted pages /login and /account will not work") ?? false);

  it("without a publishable key or issuer, starts and says in one warning line what the pages lack, naming the variables", async () => {
    const lg = production();
    try {
      await lg.listening();
      const warnings = lg.lines.filter(pagesWarning);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.msg).toContain("LINKGATE_PAGES_PUBLISHABLE_KEY");
      expect(warnings[0]!.msg).toContain("LINKGATE_ISSUER");
      expect(warnings[0]!.msg).toContain("LINKGATE_WEBAUTHN_ORIGINS");
    } finally {
      expect(await lg.stop()).toBe(0);
    }
  });

  it("with a publishable key a project holds and an https issuer, says nothing about the pages", async () => {
    const lg = production({ LINKGATE_ISSUER: "https://auth.example.com", LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY: `lg_pk_${randomBytes(32).toString("base64url")}` });
    try {
      await lg.listening();
      expect(lg.lines.filter(pagesWarning)).toEqual([]);
    } finally {
      expect(await lg.stop()).toBe(0);
    }
  });

  it("with an issuer over plain http, warns that browsers refuse passkeys there", async () => {
    const lg = production({ LINKGATE_ISSUER: "http://auth.example.com", LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY: `lg_pk_${randomBytes(32).toString("base64url")}` });
    try {
      await lg.listening();
      expect(lg.lines.filter(pagesWarning).map((l) => l.msg)).toEqual([expect.stringContaining("passkeys need https: browsers refuse them at http://auth.example.com")]);
    } finally {
      expect(await lg.stop()).toBe(0);
    }
  });

  it("refuses a LINKGATE_PAGES_PUBLISHABLE_KEY that is a secret key, and does not print it", async () => {
    const secret = `lg_sk_${randomBytes(32).toString("base64url")}`;
    const lg = production({ LINKGATE_PAGES_PUBLISHABLE_KEY: secret });
    expect(await lg.exited).toBe(1);
    expect(lg.output).toMatch(/^linkgate: LINKGATE_PAGES_PUBLISHABLE_KEY must be a publishable key/m);
    expect(lg.output).not.toContain(secret);
  });
});

describe.each(backends)("the hosted pages' development key on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(async () => {
    await h?.close();
  });
  /** The harness's configuration without a pages key, as on a first start. */
  const unset = () => ({ ...h.config, pagesPublishableKey: undefined });

  it("is the same publishable key of the project default on every start, stored once as a hash, and signs users in", async () => {
    const first = await resolvePagesKey(unset(), h.db.prisma, h.app.deps.master);
    const again = await resolvePagesKey(unset(), h.db.prisma, h.app.deps.master);
    expect(first).toMatchObject({ made: true, held: true, key: expect.stringMatching(/^lg_pk_[\w-]{40,}$/) });
    expect(again.key).toBe(first.key);
    const rows = await h.db.prisma.apiKey.findMany({ where: { keyHash: sha256Hex(first.key!) } });
    expect(rows).toEqual([expect.objectContaining({ projectId: h.projectId, kind: "publishable", revokedAt: null })]);
    const start = await h.call("POST", "/auth/otp/start", { body: { email: `pages-${backend}@example.com` }, headers: { "x-api-key": first.key! } });
    expect(start.status).toBe(200);
  });

  it("is not made in production, and no longer served once revoked", async () => {
    expect(await resolvePagesKey({ ...unset(), production: true }, h.db.prisma, h.app.deps.master)).toEqual({ key: null, made: false, held: false });
    const { key } = await resolvePagesKey(unset(), h.db.prisma, h.app.deps.master);
    await h.db.prisma.apiKey.updateMany({ where: { keyHash: sha256Hex(key!) }, data: { revokedAt: new Date() } });
    expect((await resolvePagesKey(unset(), h.db.prisma, h.app.deps.master)).key).toBeNull();
  });
});
