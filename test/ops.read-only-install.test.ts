// An image runs the checkout read-only, as a user who does not own it, with the data on a volume
// (docs/operations.md, "Running in a container"). A data folder that user cannot write (the
// default ./.data inside the checkout) stopped every command with an EACCES stack trace; it is
// one line naming LINKGATE_DATA_DIR and what does without it. Root writes a folder whatever its
// mode, so the processes here are given one nobody may make a folder in: a path under /sys.
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { dataFolderFault } from "../src/data-folder.ts";
import { ConfigError } from "../src/config.ts";
import { openTestDatabase, serverUrl, type TestDatabase } from "./support/db.ts";
import { startCommand } from "./support/command.ts";
import { CLI, MAIN, MIGRATE, WORKER } from "./support/server-entry.ts";

const ROOT = path.resolve(import.meta.dirname, "..");
const UNWRITABLE = "/sys/linkgate-read-only-install";
const errno = (code: string) => Object.assign(new Error(`${code}: denied, mkdir '${UNWRITABLE}'`), { code });

const run = startCommand;

function expectOneLine(r: { code: number | null; stderr: string }, prefix: string, instead: RegExp): void {
  expect(r.code, r.stderr).toBe(1);
  expect(r.stderr.trim().split("\n"), r.stderr).toHaveLength(1);
  expect(r.stderr).toContain(`${prefix}cannot write the data folder ${UNWRITABLE}: `);
  expect(r.stderr).toMatch(/Set LINKGATE_DATA_DIR to a folder this user \(user \d+\) can write/);
  expect(r.stderr).toMatch(instead);
  expect(r.stderr).not.toMatch(/\bat .*\.(js|ts):\d+|node:fs|wasm/);
}

describe("a data folder this user may not write", () => {
  it("is said as what to set, for no permission and a read-only mount; any other failure is left as it is", () => {
    for (const code of ["EACCES", "EPERM", "EROFS"]) {
      const fault = dataFolderFault(errno(code), "./.data", "or DATABASE_URL");
      expect(fault).toBeInstanceOf(ConfigError);
      expect(fault!.message).toMatch(new RegExp(`^cannot write the data folder ${path.resolve(".data")}: .*Set LINKGATE_DATA_DIR .*, or DATABASE_URL$`));
    }
    for (const err of [errno("ENOSPC"), errno("ENOENT"), new Error("other"), null]) expect(dataFolderFault(err, "./.data", "or DATABASE_URL")).toBeNull();
  });

  it.skipIf(process.platform !== "linux").each([
    { name: "npm start", args: [MAIN], prefix: "linkgate: " },
    { name: "npm run worker", args: [WORKER], prefix: "linkgate: " },
    { name: "npm run db:migrate", args: [MIGRATE], prefix: "linkgate: " },
    { name: "linkgate db migrate", args: [CLI, "db", "migrate"], prefix: "error: " },
  ])("on embedded PGlite, $name stops with one line naming LINKGATE_DATA_DIR and DATABASE_URL", async ({ args, prefix }) => {
    const r = await run(args, { LINKGATE_DATA_DIR: UNWRITABLE }).closed;
    expectOneLine(r, prefix, /, or DATABASE_URL to use Postgres instead of the embedded database$/m);
  }, 60_000);
});

describe.skipIf(!serverUrl || process.platform !== "linux")("on Postgres", () => {
  let db: TestDatabase;
  afterAll(() => db?.close());

  it("npm start and npm run worker keep their development master key there: one line naming LINKGATE_SECRET_KEY too", async () => {
    db = await openTestDatabase("postgres");
    for (const entry of [MAIN, WORKER]) {
      const r = await run([entry], { DATABASE_URL: db.url!, LINKGATE_DATA_DIR: UNWRITABLE }).closed;
      expectOneLine(r, "linkgate: ", /, or LINKGATE_SECRET_KEY \(without it, a development master key is kept there\)$/m);
    }
  }, 120_000);

  it("in production, with LINKGATE_SECRET_KEY, the data folder is never needed", async () => {
    db ??= await openTestDatabase("postgres");
    const env = { DATABASE_URL: db.url!, LINKGATE_DATA_DIR: UNWRITABLE, NODE_ENV: "production", LINKGATE_SECRET_KEY: randomBytes(32).toString("base64"), LINKGATE_ISSUER: "https://id.example.com", SMTP_URL: "smtp://127.0.0.1:1", SMS_WEBHOOK_URL: "http://127.0.0.1:1/sms" };
    for (const [entry, ready] of [
      [MAIN, "linkgate listening on"],
      [WORKER, "delivery worker running"],
    ]) {
      const p = run([entry], env);
      await p.said(ready);
      p.child.kill("SIGTERM");
      expect((await p.closed).code).toBe(0);
    }
  }, 120_000);
});

describe("an install without dev dependencies (npm ci --omit=dev)", () => {
  // openid-client was a dev dependency that src/auth/external/upstream.ts imports: the build at
  // install could not bundle it, and `npm ci --omit=dev` failed
  it("has every package the server's sources import at run time", () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string> };
    const files = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : e.name.endsWith(".ts") ? [path.join(dir, e.name)] : []));
    const missing = new Set<string>();
    for (const file of files(path.join(ROOT, "src"))) {
      // imports of types only are gone once bundled
      const code = readFileSync(file, "utf8").replace(/^import type [^;]+;$/gms, "").replace(/^export type [^;]+;$/gms, "");
      const specs = [/^(?:import|export)\s[^;]*?\bfrom\s*["']([^"']+)["']/gm, /^import\s*["']([^"']+)["']/gm, /\bimport\(\s*["']([^"']+)["']\s*\)/g].flatMap((re) =>
        [...code.matchAll(re)].map((m) => m[1]),
      );
      for (const spec of specs) {
        if (spec.startsWith(".") || spec.startsWith("node:") || builtinModules.includes(spec)) continue;
        const name = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0];
        if (!(name in pkg.dependencies)) missing.add(`${name} (${path.relative(ROOT, file)})`);
      }
    }
    expect([...missing]).toEqual([]);
  });
});
