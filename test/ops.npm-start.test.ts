// `npm start` and `npm run worker` exactly as a user, a container or a process manager runs
// them: the built server runs under npm with no shell left in between, and SIGTERM to the
// one PID they know (npm's) drains and stops every process that command started.
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { converse, lastAnswer } from "./support/raw-http.ts";
import { migratedDataDir } from "./support/server-entry.ts";

const ROOT = path.resolve(import.meta.dirname, "..");
let dataDir: string;

beforeAll(async () => {
  // `npm test` builds before vitest starts (pretest); this covers running this file alone.
  await promisify(execFile)(process.execPath, ["scripts/build-server.mjs", "--if-stale"], { cwd: ROOT });
  // An existing, migrated database, as on every start but the first.
  dataDir = migratedDataDir("linkgate-npm-start-");
});

type Proc = { pid: number; ppid: number; pgid: number; state: string; cmdline: string };

/** Every live process, from /proc. */
function processes(): Proc[] {
  const out: Proc[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // The command name may hold spaces and parentheses; the fields after its last ")" do not.
      const [state, ppid, pgid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const cmdline = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
      out.push({ pid: Number(name), ppid: Number(ppid), pgid: Number(pgid), state, cmdline });
    } catch {
      // gone between readdir and read
    }
  }
  return out;
}

/** The processes below `pid`, children first. */
function descendants(pid: number): Proc[] {
  const all = processes();
  const found: Proc[] = [];
  const queue = [pid];
  while (queue.length) {
    const parent = queue.shift()!;
    for (const p of all.filter((x) => x.ppid === parent)) {
      found.push(p);
      queue.push(p.pid);
    }
  }
  return found;
}

const alive = (pid: number) => processes().some((p) => p.pid === pid && p.state !== "Z");

/**
 * dist/ holds one bundle per command (scripts/build-server.mjs), and its modules still find the
 * files beside them: the pages, the dashboard, Swagger UI's and GraphiQL's files in their
 * packages, and the chunks loaded at first use (GraphiQL's page, the OpenID provider). Failed
 * with each module's import.meta.url left as the bundle's: the server could not find
 * package.json to start.
 */
async function expectServesItsFiles(base: string) {
  const get = async (url: string, accept = "*/*") => {
    const res = await fetch(new URL(url, base), { headers: { accept } });
    return { status: res.status, type: res.headers.get("content-type") ?? "", text: await res.text() };
  };
  /** The page answers, and so does every script and stylesheet of this origin it names. */
  const page = async (url: string) => {
    const html = await get(url, "text/html");
    expect([url, html.status, html.type]).toEqual([url, 200, expect.stringContaining("text/html")]);
    const files = [...html.text.matchAll(/(?:src|href)="(\/[^"]+\.(?:js|css))"/g)].map((m) => m[1]);
    expect(files.length, url).toBeGreaterThan(0);
    for (const file of files) {
      const r = await get(file);
      expect([file, r.status, r.text.length > 0]).toEqual([file, 200, true]);
    }
    return html.text;
  };
  await page("/login");
  await page("/dashboard");
  expect(await page("/docs")).toContain("swagger-ui-bundle.js");
  expect(await page("/graphql")).toContain("graphiql.js");
  expect(JSON.parse((await get("/openapi.json")).text)).toMatchObject({ openapi: expect.any(String) });
  expect(JSON.parse((await get("/.well-known/openid-configuration")).text)).toMatchObject({ issuer: expect.any(String) });
}

/**
 * What the server itself answers (src/http/server.ts), as `npm start` sets it up: a request its
 * parser refuses, in the error shape with a request id; no invitation to send a body over the limit.
 */
async function expectAnswersBeforeTheApp(port: number) {
  // /graphql bounds its body before any credential is read
  const head = "POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";
  const refused = lastAnswer(await converse(port, (s) => s.write(`${head}Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}`)));
  expect(refused.status).toBe(400);
  expect(refused.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
  expect(JSON.parse(refused.body)).toMatchObject({ error: "InvalidRequest" });
  const raw = await converse(port, (s) => s.write(`${head}Content-Length: 2000000\r\nExpect: 100-continue\r\n\r\n`));
  expect(raw).not.toContain("100 Continue");
  expect(lastAnswer(raw).status).toBe(413);
}

describe.each([
  { script: "start", entry: "dist/main.js", ready: /linkgate listening on (http:\/\/\S+)/, serves: ", serves its pages, /docs and GraphiQL with their files" },
  { script: "worker", entry: "dist/worker.js", ready: /delivery worker running/, serves: "" },
])("npm $script", ({ script, entry, ready, serves }) => {
  it(`runs node ${entry} directly under npm${serves}, and SIGTERM to npm's PID drains it and leaves no process behind`, async () => {
    const npm = spawn("npm", script === "start" ? ["start"] : ["run", script], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, PORT: "0", HOST: "127.0.0.1", LINKGATE_DATA_DIR: dataDir },
      // Its own process group, as a container's first process or a service manager's has; it
      // also lets this test find anything of it that outlives npm.
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    // A failed expectation must not leave the server holding the data folder the next test
    // opens: its group is killed, and gone before that test starts (a passing test stopped it).
    onTestFinished(async () => {
      const group = () => processes().filter((p) => p.pgid === npm.pid && p.state !== "Z");
      if (!group().length) return;
      process.kill(-npm.pid!, "SIGKILL");
      for (let i = 0; i < 100 && group().length; i++) await new Promise((r) => setTimeout(r, 50));
    });
    const lines: string[] = [];
    let stderr = "";
    npm.stderr.on("data", (c) => (stderr += c));
    const exited = new Promise<number | null>((resolve) => npm.on("exit", (code) => resolve(code)));
    const readyLine = await new Promise<RegExpExecArray>((resolve, reject) => {
      createInterface({ input: npm.stdout }).on("line", (line) => {
        lines.push(line);
        const m = ready.exec(line);
        if (m) resolve(m);
      });
      void exited.then((code) => reject(new Error(`npm ${script} exited (${code}) before it was ready:\n${lines.join("\n")}\n${stderr}`)));
    });

    if (script === "start") {
      expect((await fetch(new URL("/readyz", readyLine[1]))).status).toBe(200);
      await expectServesItsFiles(readyLine[1]);
      await expectAnswersBeforeTheApp(Number(new URL(readyLine[1]).port));
    }
    const tree = descendants(npm.pid!);
    // No shell in between: npm forwards SIGTERM to its child, and a shell would not pass it on.
    expect(tree.map((p) => p.cmdline)).toEqual([`node ${entry}`]);

    process.kill(npm.pid!, "SIGTERM");
    expect(await exited, `${lines.join("\n")}\n${stderr}`).toBe(0);
    expect(lines.some((l) => l.includes('"msg":"stopped"')), lines.join("\n")).toBe(true);
    expect(tree.filter((p) => alive(p.pid))).toEqual([]);
    expect(processes().filter((p) => p.pgid === npm.pid && p.state !== "Z")).toEqual([]);
  });
});

describe("npx linkgate in a checkout", () => {
  // npx links the checkout into its cache to run the bin, which ran the postinstall again in
  // the checkout: every build redone (14 to 27 s) and dist/ rewritten under running servers
  // (eighteenth review). A cache of its own makes this the first npx run on a machine.
  it("runs the CLI without building anything again", async () => {
    const stamp = path.join(ROOT, "dist", ".built");
    const built = statSync(stamp).mtimeMs;
    const cache = mkdtempSync(path.join(tmpdir(), "linkgate-npx-cache-"));
    try {
      const { stdout } = await promisify(execFile)("npx", ["--yes", "linkgate", "--help"], { cwd: ROOT, env: { ...process.env, npm_config_cache: cache }, timeout: 120_000 });
      expect(stdout).toContain("Usage: linkgate");
      expect(statSync(stamp).mtimeMs).toBe(built);
    } finally {
      rmSync(cache, { recursive: true, force: true });
    }
  }, 150_000);
});
