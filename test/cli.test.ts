// The admin CLI (bin/linkgate.mjs) against a fresh PGlite folder (LINKGATE_DATA_DIR) and a
// freshly created, unmigrated Postgres database. What only a process shows runs in a real child
// process, as an operator runs it: usage errors and their exit codes before any database is
// opened, an unreachable server, `--help` and `--version`, `db migrate` (its process must exit
// although Prisma's schema engine leaves a timer behind), and the folder's lock against another
// process. The commands' own behaviour runs through runCli, what bin/linkgate.mjs calls, in this
// process with the same environment: each start of the CLI as a process cost 1 to 3 s of CPU
// here (PGlite's and Prisma's WebAssembly compiled again), and this file took 83 s of the suite
// with every command a process.
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keyPrefix } from "../src/auth/projects.ts";
import { sha256Hex } from "../src/crypto.ts";
import { openDatabase, type Database } from "../src/db/client.ts";
import { adminQuery, backends, serverUrl, TEST_CONNECT_TIMEOUT_MS, withDatabase, type Backend } from "./support/db.ts";
import { runCliHere } from "./support/command.ts";
import { runCli } from "../src/cli/program.ts";
import { bulkEnqueue, newMasterKey, seedWebhook } from "./support/receiver.ts";

const BIN = fileURLToPath(new URL("../bin/linkgate.mjs", import.meta.url));

type Run = { code: number; stdout: string; stderr: string };

/** The environment `npm start` would see, minus anything naming another database. */
function baseEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k === "DATABASE_URL" || k.startsWith("LINKGATE_")) delete env[k];
  return env;
}

/** `timeoutMs` only catches a CLI that hangs: a command that works may take as long as the machine makes it. */
function run(env: NodeJS.ProcessEnv, args: string[], timeoutMs = 45_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env, timeout: timeoutMs }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

const json = (r: Run) => {
  expect(r.stderr.split("\n").filter((l) => l.startsWith("error"))).toEqual([]);
  return JSON.parse(r.stdout);
};

/** The CLI as a process whose reader of stdout has gone (`linkgate keys list | head -0`): every write to it fails. */
function runWithStdoutClosed(env: NodeJS.ProcessEnv, args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.destroy();
    let stderr = "";
    child.stderr.on("data", (c) => (stderr += c));
    child.on("close", (code) => resolve({ code, stderr }));
  });
}

/** A usage or run failure: exactly one line, on stderr, nothing on stdout. */
function expectOneLineError(r: Run, code: number, pattern: RegExp) {
  expect(r.code, r.stderr).toBe(code);
  expect(r.stdout).toBe("");
  expect(r.stderr).toMatch(/^error: [^\n]+\n$/);
  expect(r.stderr).toMatch(pattern);
}

type Target = { env: NodeJS.ProcessEnv; open(): Promise<Database>; drop(): Promise<void> };

/** An empty database, not migrated: the CLI's own `db migrate` sets it up. */
async function emptyDatabase(backend: Backend): Promise<Target> {
  const dataDir = mkdtempSync(path.join(tmpdir(), "linkgate-cli-"));
  if (backend === "pglite") {
    return {
      env: { ...baseEnv(), LINKGATE_DATA_DIR: dataDir },
      // Only while no CLI process runs: PGlite is one process's database.
      open: () => openDatabase({ dataDir }),
      drop: async () => rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const name = `lg_cli_${randomBytes(6).toString("hex")}`;
  await adminQuery(`CREATE DATABASE ${name}`);
  const url = withDatabase(serverUrl!, name);
  return {
    env: { ...baseEnv(), LINKGATE_DATA_DIR: dataDir, DATABASE_URL: url },
    open: () => openDatabase({ databaseUrl: url, dataDir: "", connectTimeoutMs: TEST_CONNECT_TIMEOUT_MS }),
    drop: async () => {
      await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function inspect<T>(t: Target, fn: (db: Database) => Promise<T>): Promise<T> {
  const db = await t.open();
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

describe("linkgate CLI usage errors", () => {
  const env = { ...baseEnv(), LINKGATE_DATA_DIR: path.join(tmpdir(), "linkgate-cli-never-opened") };

  it("a bad argument gets a one-line error on stderr and exit code 2, before any database is opened", async () => {
    const cases: [string[], RegExp][] = [
      [["frobnicate"], /unknown command 'frobnicate'/],
      [["projects", "list", "--colour"], /unknown option '--colour'/],
      [["projects", "create", "   "], /1 to 200 characters/],
      [["projects", "create", "x".repeat(201)], /1 to 200 characters/],
      [["keys", "create", "--project", "prj_x", "--kind", "root"], /Allowed choices are secret, publishable/],
      [["keys", "create", "--kind", "secret"], /required option '--project <id>' not specified/],
      [["keys", "revoke", "prj_x"], /Expected an id like key_/],
      [["deliveries", "replay", "--webhook", "wh_x", "--since", "yesterday"], /--since <time>.*Use a time with a zone/],
      [["deliveries", "replay", "--webhook", "wh_x", "--since", "2026-11-20T10:00"], /Use a time with a zone/],
      // a day that does not exist, and times the database cannot hold (fourteenth review)
      [["deliveries", "replay", "--webhook", "wh_x", "--since", "2026-02-31"], /Use a time with a zone/],
      [["deliveries", "replay", "--webhook", "wh_x", "--since", "999999w"], /from the years 1 to 9999/],
      [["deliveries", "replay", "--webhook", "wh_x", "--since", "0000-01-01"], /from the years 1 to 9999/],
      [["deliveries", "replay", "--webhook", "wh_x", "--since", "1h", "--batch-size", "0"], /whole number/],
      // the last of two used to win quietly (fourteenth review)
      [["keys", "create", "--project", "prj_aaaaaaaaaaaaaaaaaaaaaa", "--project", "prj_bbbbbbbbbbbbbbbbbbbbbb", "--kind", "secret"], /option '--project <id>' given more than once/],
      [["keys", "create", "--project", "prj_aaaaaaaaaaaaaaaaaaaaaa", "--kind", "publishable", "--kind=secret"], /option '--kind <kind>' given more than once/],
    ];
    const here = await Promise.all(cases.map(([args]) => runCliHere(env, args)));
    here.forEach((r, i) => expectOneLineError(r, 2, cases[i][1]));
    // and as processes, which exit with that code: an unknown command, a value, a repeated option
    const sample = [cases[0], cases[2], cases[cases.length - 1]];
    const processes = await Promise.all(sample.map(([args]) => run(env, args)));
    processes.forEach((r, i) => expectOneLineError(r, 2, sample[i][1]));
    expect(existsSync(env.LINKGATE_DATA_DIR!)).toBe(false);
  });

  it("with Postgres unreachable, every command says so on one line, as `npm start` does, and exits 1", async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const unreachable = { ...env, DATABASE_URL: `postgres://postgres:pw-do-not-print@127.0.0.1:${port}/linkgate` };
    const commands = [["projects", "list"], ["db", "migrate"], ["webhooks", "list"]];
    for (const r of await Promise.all(commands.map((args) => run(unreachable, args)))) {
      expectOneLineError(r, 1, new RegExp(`cannot reach the database at postgres://postgres:\\*\\*\\*@127\\.0\\.0\\.1:${port}/linkgate: connect ECONNREFUSED`));
      expect(r.stderr).not.toContain("pw-do-not-print");
    }
  });

  it("--help and --version exit 0", async () => {
    const [help, version] = await Promise.all([run(env, ["keys", "create", "--help"]), run(env, ["--version"])]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("--kind <kind>");
    expect(version).toMatchObject({ code: 0, stdout: "0.1.0\n" });
  });
});

describe("what lists show of a key", () => {
  // 32nd review: a bootstrap key is the operator's own text, as short as 16 characters, and
  // `keys list` showed its first 10
  it("a generated key's kind and 4 of its random characters; 4 characters of any other, stored before or since", () => {
    expect(keyPrefix("lg_sk_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abc")).toBe("lg_sk_AbCd");
    expect(keyPrefix("lg_pk_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abc")).toBe("lg_pk_AbCd");
    expect(keyPrefix("mysupersecretkey1")).toBe("mysu");
    expect(keyPrefix("mysupersec")).toBe("mysu");
  });
});

// The backends run one after the other, and so do the steps within each. Side by side, PGlite's
// in-process database (the steps that inspect the folder) held this process's one thread while
// the Postgres half waited on it: one Postgres step took 62 s in a run where it took 24 s alone.
describe.each(backends)("linkgate CLI on %s", (backend) => {
  let t: Target;
  const cli = (...args: string[]) => runCliHere(t.env, args);
  let acme: { id: string; keys: { id: string; kind: string; key: string }[] };
  let extraKey: { id: string; key: string };
  let betaId: string;

  beforeAll(async () => {
    t = await emptyDatabase(backend);
  });
  afterAll(async () => {
    await t?.drop();
  });

  it("before `db migrate`, a command says to run it (exit 1), and creates nothing", async () => {
    const expected = backend === "pglite" ? /no linkgate database in .*`linkgate db migrate`/ : /lacks \d+ migration\(s\).*run `linkgate db migrate`/;
    expectOneLineError(await cli("projects", "list"), 1, expected);
    if (backend === "pglite") expect(existsSync(path.join(t.env.LINKGATE_DATA_DIR!, "pglite"))).toBe(false);
  });

  // Applying every migration to an empty database takes 8 s of CPU on PGlite here (initdb and ~100
  // migrations in WebAssembly), and with the rest of the suite on both cores it came within a few
  // seconds of the 45 s that catch a hung CLI (past them with three test workers): it gets more.
  it("db migrate applies every migration, then finds none pending", { timeout: 240_000 }, async () => {
    const first = await run(t.env, ["db", "migrate"], 180_000);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/^applied \d+ migration\(s\):\n {2}\d+_init\n/);
    expect(json(await cli("db", "migrate", "--json"))).toEqual({ applied: [] });
  });

  it("projects create prints the project and both keys once; projects list shows them", async () => {
    const created = await cli("projects", "create", "Acme", "--json");
    expect(created.code, created.stderr).toBe(0);
    expect(created.stderr).toContain("never shown again");
    const body = json(created);
    expect(body.project).toMatchObject({ name: "Acme", id: expect.stringMatching(/^prj_/) });
    expect(body.keys.map((k: { kind: string; key: string }) => [k.kind, k.key.slice(0, 6)])).toEqual([
      ["secret", "lg_sk_"],
      ["publishable", "lg_pk_"],
    ]);
    acme = { id: body.project.id, keys: body.keys };

    const beta = await cli("projects", "create", "  Beta Corp ");
    expect(beta.code, beta.stderr).toBe(0);
    expect(beta.stdout).toMatch(/│ PROJECT\s+│ NAME\s+│ KIND\s+│ KEY ID\s+│ KEY\s+│/);
    expect(beta.stdout).toMatch(/│ Beta Corp │ secret\s+│ key_\S+\s+│ lg_sk_\S{43}\s+│/);
    expect(beta.stdout).toMatch(/│ Beta Corp │ publishable │ key_\S+\s+│ lg_pk_\S{43}\s+│/);
    betaId = /(prj_\S+)/.exec(beta.stdout)![1];

    const list = json(await cli("projects", "list", "--json"));
    expect(list).toEqual([
      { id: acme.id, name: "Acme", createdAt: expect.any(String), secretKeys: 1, publishableKeys: 1, webhooks: 0 },
      { id: betaId, name: "Beta Corp", createdAt: expect.any(String), secretKeys: 1, publishableKeys: 1, webhooks: 0 },
    ]);
    const table = await cli("projects", "list");
    expect(table.stdout).toMatch(new RegExp(`│ ${acme.id} │ Acme\\s+│ \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ │ 1\\s+│ 1\\s+│ 0\\s+│`));
  });

  it.runIf(backend === "pglite")("a command refuses, on one line, while another process has the folder open", async () => {
    // PGlite has no lock between processes of its own: while this process holds it, the CLI must refuse
    await inspect(t, async () => {
      expectOneLineError(await run(t.env, ["webhooks", "list"]), 1, new RegExp(`is open in process ${process.pid} \\(is linkgate running\\?\\)`));
    });
  });

  it("keys create, list and revoke; a key is printed once and its hash never", async () => {
    const created = json(await cli("keys", "create", "--project", acme.id, "--kind", "publishable", "--json"));
    expect(created).toEqual({ id: expect.stringMatching(/^key_/), projectId: acme.id, kind: "publishable", key: expect.stringMatching(/^lg_pk_/) });
    extraKey = created;

    const revoked = await cli("keys", "revoke", created.id);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toBe(`revoked ${created.id} (publishable key ${created.key.slice(0, 10)}… of ${acme.id})\n`);
    expectOneLineError(await cli("keys", "revoke", created.id), 1, /already revoked/);
    expectOneLineError(await cli("keys", "create", "--project", "prj_doesnotexist", "--kind", "secret"), 1, /no such project/);

    const listed = await cli("keys", "list", "--project", acme.id, "--json");
    const keys = json(listed);
    expect(keys.map((k: { id: string; revokedAt: string | null }) => [k.id, k.revokedAt === null])).toEqual([
      ...acme.keys.map((k) => [k.id, true]),
      [created.id, false],
    ]);
    for (const k of keys) expect(Object.keys(k).sort()).toEqual(["createdAt", "id", "kind", "prefix", "projectId", "revokedAt"]);
    const all = await cli("keys", "list");
    expect(all.stdout.match(/│ key_/g)).toHaveLength(5);
    expect(all.stdout).toMatch(new RegExp(`│ ${created.id} │ ${acme.id} │ publishable │ ${created.key.slice(0, 10)}… │ \\S+\\s+│ revoked \\d{4}-`));
    for (const out of [listed.stdout, all.stdout]) {
      for (const k of [...acme.keys, created]) {
        expect(out).not.toContain(k.key);
        expect(out).not.toContain(sha256Hex(k.key));
      }
    }
  });

  it("a key that cannot be printed (stdout gone, disk full) is said on one line with its id to revoke, exit 1", async () => {
    const broken = new Writable({ write: (_chunk, _enc, cb) => cb(Object.assign(new Error("write EPIPE"), { code: "EPIPE" })) });
    let stderr = "";
    const stderrStream = new Writable({ write: (chunk, _enc, cb) => ((stderr += chunk), cb()) });
    const code = await runCli(["keys", "create", "--project", betaId, "--kind", "secret", "--json"], { env: t.env, stdout: broken, stderr: stderrStream });
    expect(code).toBe(1);
    expect(stderr).toMatch(/^error: could not write the output: write EPIPE: key (key_\S+) was created and never shown; revoke it \(`linkgate keys revoke key_\S+`\)[^\n]*\n$/);
    const lost = /key (key_\S+) was created/.exec(stderr)![1];
    const keys = json(await cli("keys", "list", "--project", betaId, "--json"));
    expect(keys.find((k: { id: string }) => k.id === lost)).toMatchObject({ kind: "secret", revokedAt: null });
    expect((await cli("keys", "revoke", lost)).code).toBe(0);
  });

  it("a list whose reader has gone ends with one line on stderr and exit 1, not a stack trace", async () => {
    const r = await runWithStdoutClosed(t.env, ["keys", "list"]);
    expect(r.stderr).toMatch(/^error: could not write the output: [^\n]+\n$/);
    expect(r.code).toBe(1);
  });

  it("keys list and webhooks list --project of no project: no such project, exit 1; of a project without any: an empty list", async () => {
    for (const what of ["keys", "webhooks"]) {
      expectOneLineError(await cli(what, "list", "--project", "prj_AAAAAAAAAAAAAAAAAAAAAA"), 1, /^error: no such project\n$/);
    }
    expect(json(await cli("webhooks", "list", "--project", betaId, "--json"))).toEqual([]);
  });

  it("webhooks list, and deliveries replay with progress, resets exactly the failed deliveries since TIME", async () => {
    // Straight into the database (no command runs meanwhile): what the API and the worker would
    // have left behind. 2,500 failed deliveries make three batches of 1,000 (on PGlite, each on
    // its one connection: src/db/connection-share.ts).
    const seeded = await inspect(t, async (db) => {
      // The keys the CLI printed are the ones stored.
      const hashes = await db.prisma.apiKey.findMany({ where: { projectId: acme.id }, select: { keyHash: true } });
      expect(hashes.map((h) => h.keyHash).sort()).toEqual([...acme.keys, extraKey].map((k) => sha256Hex(k.key)).sort());

      const master = newMasterKey();
      const hook = await seedWebhook(db, master, { url: "https://receiver.example/hooks", projectId: acme.id });
      await bulkEnqueue(db, acme.id, 2500);
      await seedWebhook(db, master, { url: "https://old.example/hooks", projectId: acme.id, enabled: false });
      await seedWebhook(db, master, { url: "https://beta.example/hooks", projectId: betaId });
      await db.prisma.$executeRaw`UPDATE deliveries SET status = 'failed', attempts = 6, completed_at = now(), last_status = 500 WHERE webhook_id = ${hook.webhookId}`;
      const pick = async (n: number) => (await db.prisma.delivery.findMany({ where: { webhookId: hook.webhookId, status: "failed" }, take: n, select: { id: true } })).map((d) => d.id);
      await db.prisma.delivery.updateMany({ where: { id: { in: await pick(10) } }, data: { status: "gone" } });
      await db.prisma.delivery.updateMany({ where: { id: { in: await pick(10) } }, data: { status: "succeeded" } });
      await db.prisma.delivery.updateMany({ where: { id: { in: await pick(5) } }, data: { createdAt: new Date(Date.now() - 3 * 86_400_000) } });
      return hook;
    });

    const hooks = json(await cli("webhooks", "list", "--json"));
    expect(hooks).toEqual([
      expect.objectContaining({ id: seeded.webhookId, projectId: acme.id, url: "https://receiver.example/hooks", events: ["user.created"], enabled: true, disabledReason: null }),
      expect.objectContaining({ projectId: acme.id, url: "https://old.example/hooks", enabled: false }),
      expect.objectContaining({ projectId: betaId, url: "https://beta.example/hooks", enabled: true }),
    ]);
    for (const h of hooks) expect(Object.keys(h).join()).not.toMatch(/secret/i);
    const acmeList = await cli("webhooks", "list", "--project", acme.id);
    expect(acmeList.code, acmeList.stderr).toBe(0);
    const acmeHooks = acmeList.stdout;
    expect(acmeHooks).toMatch(new RegExp(`│ ${seeded.webhookId} │ ${acme.id} │ https://receiver.example/hooks\\s+│ user.created\\s+│ enabled\\s+│`));
    expect(acmeHooks).toMatch(/│ https:\/\/old.example\/hooks\s+│ user.created\s+│ disabled\s+│/);
    expect(acmeHooks).not.toContain("beta.example");

    const replay = await cli("deliveries", "replay", "--webhook", seeded.webhookId, "--since", "24h", "--progress", "--json");
    expect(replay.code, replay.stderr).toBe(0);
    expect(json(replay)).toEqual({ webhookId: seeded.webhookId, projectId: acme.id, since: expect.any(String), replayed: 2475 });
    expect(replay.stderr).toMatch(/replaying \[[^\]]+\] 100% 2475\/2475 deliveries/);

    const again = await cli("deliveries", "replay", "--webhook", seeded.webhookId, "--since", new Date(Date.now() - 86_400_000).toISOString());
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(new RegExp(`^no failed deliveries of ${seeded.webhookId} since `));
    expectOneLineError(await cli("deliveries", "replay", "--webhook", "wh_doesnotexist", "--since", "1d"), 1, /no such webhook/);

    const states = await inspect(t, (db) =>
      db.prisma.$queryRaw<{ state: string; n: number }[]>`
        SELECT status::text || ' ' || attempts || ' ' || (completed_at IS NULL) || ' ' || (next_attempt_at <= now()) AS state, count(*)::int AS n
        FROM deliveries WHERE webhook_id = ${seeded.webhookId} GROUP BY 1 ORDER BY 1`,
    );
    // Replayed: pending, due, attempt counter reset, as replayFailed leaves them.
    expect(states).toEqual([
      { state: "failed 6 false true", n: 5 },
      { state: "gone 6 false true", n: 10 },
      { state: "pending 0 true true", n: 2475 },
      { state: "succeeded 6 false true", n: 10 },
    ]);
  });

  it("a replay of a disabled webhook says its deliveries wait until it is enabled, not that a worker sends them now", async () => {
    const paused = await inspect(t, async (db) => {
      const hook = await seedWebhook(db, newMasterKey(), { url: "https://paused.example/hooks", projectId: betaId });
      await bulkEnqueue(db, betaId, 3);
      await db.prisma.$executeRaw`UPDATE deliveries SET status = 'failed', attempts = 6, completed_at = now(), last_status = 500 WHERE webhook_id = ${hook.webhookId}`;
      await db.prisma.webhook.update({ where: { id: hook.webhookId }, data: { enabled: false } });
      return hook.webhookId;
    });
    const r = await cli("deliveries", "replay", "--webhook", paused, "--since", "1h");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^replayed 3 failed deliveries of ${paused} since \\S+; the webhook is disabled: they are sent once it is enabled \\(updateWebhook with enabled: true\\)\n$`));
  });
});
