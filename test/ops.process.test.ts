// The process as `npm start` runs it: listens, reports ready, drains and exits on SIGTERM;
// production refuses to start without its transports and master key.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";
import { MAIN, migratedDataDir } from "./support/server-entry.ts";

/** Every process a test started: one a failed expectation left running is stopped after it (it outlived a failing run once). */
const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

function start(env: Record<string, string>) {
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH, PORT: "0", LINKGATE_DATA_DIR: mkdtempSync(path.join(tmpdir(), "linkgate-proc-")), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  started.push(child);
  let out = "";
  child.stdout.on("data", (c) => (out += c));
  child.stderr.on("data", (c) => (out += c));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const port = async () => {
    for (let i = 0; i < 600 && !/"port":(\d+)/.test(out); i++) await new Promise((r) => setTimeout(r, 100));
    return Number(/"port":(\d+)/.exec(out)?.[1]);
  };
  return { child, exited, port, output: () => out };
}

describe("the linkgate process", () => {
  it("a first development start prints the project's two keys once, serves, and drains on SIGTERM", async () => {
    const p = start({ LINKGATE_WORKER: "1" });
    const port = await p.port();
    expect(port, p.output()).toBeGreaterThan(0);
    expect(p.output()).toMatch(/keys \(shown only now\)/);
    expect(p.output()).toMatch(/publishable \(front-end apps, safe to ship\): lg_pk_[A-Za-z0-9_-]{40,}/);
    expect(p.output()).toMatch(/secret \(servers and the dashboard, keep it secret\): lg_sk_[A-Za-z0-9_-]{40,}/);
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    expect(ready.status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    const graphiql = await fetch(`http://127.0.0.1:${port}/graphql`, { headers: { accept: "text/html" } });
    expect(await graphiql.text()).toContain("GraphiQL");
    p.child.kill("SIGTERM");
    expect(await p.exited).toBe(0);
    expect(p.output()).toContain('"msg":"stopped"');
  });

  it("a first production start prints no secret key into its log, only the publishable one and how to make a secret key", async () => {
    const p = start({
      NODE_ENV: "production",
      LINKGATE_WORKER: "0",
      LINKGATE_SECRET_KEY: randomBytes(32).toString("base64"),
      SMTP_URL: "smtp://127.0.0.1:9",
      SMS_WEBHOOK_URL: "http://127.0.0.1:9/sms",
    });
    const port = await p.port();
    expect(port, p.output()).toBeGreaterThan(0);
    expect(p.output()).toMatch(/publishable \(front-end apps, safe to ship\): lg_pk_[A-Za-z0-9_-]{40,}/);
    expect(p.output()).not.toMatch(/lg_sk_/);
    const command = /npx linkgate keys create --project (prj_[\w-]+) --kind secret/.exec(p.output());
    expect(command, p.output()).not.toBeNull();
    // on the embedded database the CLI can only run once the server has stopped (twentieth review)
    expect(p.output()).toContain("with this server stopped");
    p.child.kill("SIGTERM");
    expect(await p.exited).toBe(0);
  });

  it("NODE_ENV=production refuses to start without transports and LINKGATE_SECRET_KEY", async () => {
    const p = start({ NODE_ENV: "production" });
    expect(await p.exited).toBe(1);
    expect(p.output()).toMatch(/LINKGATE_SECRET_KEY.*SMTP_URL.*SMS_WEBHOOK_URL/);
  });
});

// PORT=0 without LINKGATE_ISSUER named the issuer http://localhost:0: discovery sent clients to
// endpoints on port 0, and every token's `iss` named a place no one reaches (docs/configuration.md, PORT).
describe.each(backends)("PORT=0 on %s", (backend) => {
  let db: TestDatabase | undefined;
  beforeAll(async () => {
    if (backend === "postgres") db = await openTestDatabase("postgres");
  });
  afterAll(() => db?.close());

  it("without LINKGATE_ISSUER, the issuer (discovery, tokens' iss) names the port the system picked", async () => {
    const publishable = `lg_pk_${randomBytes(24).toString("base64url")}`;
    const p = start({
      LINKGATE_WORKER: "0",
      LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY: publishable,
      LINKGATE_DATA_DIR: migratedDataDir("linkgate-port0-"),
      ...(db ? { DATABASE_URL: db.url! } : {}),
    });
    const port = await p.port();
    expect(port, p.output()).toBeGreaterThan(0);
    const issuer = `http://localhost:${port}`;
    expect(p.output()).toContain(`linkgate listening on ${issuer} `);

    const discovery = await (await fetch(`http://127.0.0.1:${port}/.well-known/openid-configuration`)).json();
    expect(discovery.issuer).toBe(issuer);
    expect(discovery.jwks_uri).toMatch(new RegExp(`^${issuer}/`));
    expect(discovery.token_endpoint).toMatch(new RegExp(`^${issuer}/`));

    const post = (path: string, body: object) =>
      fetch(`http://127.0.0.1:${port}${path}`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": publishable }, body: JSON.stringify(body) });
    const started = await post("/auth/otp/start", { email: "port-zero@example.com" });
    expect(started.status).toBe(200);
    const { state_id } = await started.json();
    // development without a transport logs the code
    for (let i = 0; i < 100 && !/"code":"\d{6}"/.test(p.output()); i++) await new Promise((r) => setTimeout(r, 50));
    const code = /"code":"(\d{6})"/.exec(p.output())?.[1];
    expect(code, p.output()).toBeDefined();
    const verified = await post("/auth/otp/verify", { state_id, otp: code });
    expect(verified.status).toBe(200);
    const { id_token, access_token } = await verified.json();
    for (const token of [id_token, access_token]) {
      expect(JSON.parse(Buffer.from(token.split(".")[1], "base64url").toString()).iss).toBe(issuer);
    }
    p.child.kill("SIGTERM");
    expect(await p.exited).toBe(0);
  });
});
