// Starting against a database that cannot be reached: each command says so on one line of
// stderr, with the URL's password masked, and exits 1 (no driver or WebAssembly stack trace).
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { redactUrl } from "../src/lifecycle.ts";
import { MAIN, MIGRATE, WORKER } from "./support/server-entry.ts";

const ROOT = path.resolve(import.meta.dirname, "..");
const PASSWORD = "pw-7f3a9c-do-not-print";

/** A loopback port on which nothing listens. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function run(entry: string, env: Record<string, string>) {
  const child = spawn(process.execPath, [entry], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", PORT: "0", LINKGATE_DATA_DIR: mkdtempSync(path.join(tmpdir(), "linkgate-startup-")), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c) => (stdout += c));
  child.stderr.on("data", (c) => (stderr += c));
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on("close", (code) => resolve({ code, stdout, stderr })),
  );
}

describe("a database that cannot be reached at start", () => {
  it.each([
    { name: "npm start", entry: MAIN },
    { name: "npm run worker", entry: WORKER },
    { name: "npm run db:migrate", entry: MIGRATE },
  ])(
    "$name prints one line naming the URL without its password and the reason, then exits 1",
    async ({ entry }) => {
      const port = await closedPort();
      const url = `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/linkgate`;
      const r = await run(entry, { DATABASE_URL: url });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toBe(`linkgate: cannot reach the database at postgres://postgres:***@127.0.0.1:${port}/linkgate: connect ECONNREFUSED 127.0.0.1:${port}\n`);
      expect(r.stdout + r.stderr).not.toContain(PASSWORD);
      expect(r.stderr).not.toMatch(/\bat .*\.js:\d+|wasm/);
    },
    60_000,
  );
});

describe("redactUrl", () => {
  it("masks the password and credential-like parameters, and keeps the rest", () => {
    expect(redactUrl("postgres://app:s3cr%40t@db.internal:5432/linkgate?sslmode=require&sslpassword=x&application_name=lg")).toBe(
      "postgres://app:***@db.internal:5432/linkgate?sslmode=require&sslpassword=***&application_name=lg",
    );
    expect(redactUrl("postgres://db.internal/linkgate")).toBe("postgres://db.internal/linkgate");
    expect(redactUrl("not a url with a s3cret")).toBe("(an unparseable URL)");
  });
});
