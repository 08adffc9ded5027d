// The process as `npm start` runs it: listens, reports ready, drains and exits on SIGTERM;
// production refuses to start without its transports and master key.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MAIN } from "./support/server-entry.ts";

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
