// Upgrades without downtime (docs/operations.md): a new build's migrations are applied while
// the previous build keeps serving, then the new build starts beside it on the same database.
// The previous build is this repository at the commit before its newest migration, extracted
// from git history into a temporary directory with its own generated Prisma client, and run
// as its own process: two builds, two processes, one Postgres database.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Agent } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminQuery, serverUrl, withDatabase } from "./support/db.ts";
import { startMailbox, type Mailbox } from "./support/mailbox.ts";
import { TestReceiver } from "./support/receiver.ts";
import { MAIN, MIGRATE } from "./support/server-entry.ts";
import { verifyWebhook } from "../src/webhooks/receiver.ts";

const repo = process.cwd();

/**
 * The previous build: LINKGATE_UPGRADE_FROM (a commit or tag) when set, else the newest release
 * tag (v*) unless it already has this tree's newest migration, else the commit just before the
 * one that added that migration; and the newest migration, which the upgrade must apply.
 */
function previousBuild(): { commit: string; migration: string } | null {
  const migration = readdirSync(path.join(repo, "prisma/migrations"), { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name)
    .sort()
    .at(-1)!;
  const git = (...args: string[]) => spawnSync("git", args, { cwd: repo, encoding: "utf8" });
  if (git("rev-parse", "--git-dir").status !== 0) return null;
  const added = git("log", "-1", "--format=%H", "--diff-filter=A", "--", `prisma/migrations/${migration}/migration.sql`).stdout.trim();
  let release = git("describe", "--tags", "--abbrev=0", "--match", "v*").stdout.trim();
  // A release that already has the newest migration has nothing left to upgrade through.
  if (release && added && git("merge-base", "--is-ancestor", added, release).status === 0) release = "";
  // Not committed yet (a migration being written): the previous build is HEAD.
  const from = process.env.LINKGATE_UPGRADE_FROM || release || (added ? `${added}^` : "HEAD");
  const commit = git("rev-parse", "--verify", `${from}^{commit}`).stdout.trim();
  return commit ? { commit, migration } : null;
}

/** The build at `commit` in a directory of its own, sharing this tree's node_modules. */
function extractBuild(commit: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), "linkgate-old-build-"));
  const archive = spawnSync("sh", ["-c", `git archive --format=tar ${commit} | tar -x -C "${dir}"`], { cwd: repo, encoding: "utf8" });
  if (archive.status !== 0) throw new Error(`git archive ${commit}: ${archive.stderr}`);
  symlinkSync(path.join(repo, "node_modules"), path.join(dir, "node_modules"), "dir");
  // Its own Prisma client, from its own schema, into its own tree (src/generated is not in git).
  const gen = spawnSync(process.execPath, ["scripts/generate.mjs"], { cwd: dir, encoding: "utf8" });
  if (gen.status !== 0) throw new Error(`generate in ${dir}: ${gen.stdout}${gen.stderr}`);
  return dir;
}

type Proc = { child: ChildProcess; base: string; output: () => string; exited: Promise<number | null> };

/** The servers' data folders, removed once every server has exited. */
const dataDirs: string[] = [];
function dataDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "linkgate-upgrade-"));
  dataDirs.push(dir);
  return dir;
}

/**
 * `npm start` of the build in `cwd`: resolves once it listens. This tree runs its compiled
 * dist/main.js, as `npm start` does; the previous build, extracted without one, its sources.
 */
async function startBuild(cwd: string, env: Record<string, string>): Promise<Proc> {
  const child = spawn(process.execPath, cwd === repo ? [MAIN] : ["--import", "tsx", "src/main.ts"], {
    cwd,
    env: { PATH: process.env.PATH, PORT: "0", LINKGATE_DATA_DIR: dataDir(), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (c) => (out += c));
  child.stderr!.on("data", (c) => (out += c));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const port = await new Promise<number>((resolve, reject) => {
    const look = () => {
      const m = /"port":(\d+)/.exec(out);
      if (m) return resolve(Number(m[1]));
      if (child.exitCode !== null) return reject(new Error(`build in ${cwd} exited: ${out}`));
      setTimeout(look, 50);
    };
    look();
  });
  return { child, base: `http://127.0.0.1:${port}`, output: () => out, exited };
}

function runMigrations(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [MIGRATE], { cwd: repo, env: { PATH: process.env.PATH, ...env } });
  let output = "";
  child.stdout.on("data", (c) => (output += c));
  child.stderr.on("data", (c) => (output += c));
  return new Promise((resolve) => child.on("exit", (code) => resolve({ code, output })));
}

describe.skipIf(!serverUrl)("upgrades without downtime (Postgres only: PGlite belongs to one process, so two builds cannot share it)", () => {
  const build = previousBuild();
  const apiKey = `lg_sk_upgrade_${randomBytes(24).toString("base64url")}`;
  const dbName = `lg_upgrade_${randomBytes(6).toString("hex")}`;
  let oldDir = "";
  let mailbox: Mailbox;
  let receiver: TestReceiver;
  let moved: TestReceiver;
  let env: Record<string, string>;
  const procs: Proc[] = [];
  // The test's connections to the gateways, ended before they are stopped: a draining gateway
  // waits for an idle keep-alive connection until its client ends it, which fetch's shared pool
  // did some 3 s after its last request (docs/configuration.md, "Shutdown").
  const connections = new Agent();

  beforeAll(async () => {
    if (!build) throw new Error("needs the repository's git history (a clone, not a tarball) to build the previous release");
    mailbox = await startMailbox();
    receiver = await TestReceiver.start();
    moved = await TestReceiver.start();
    await adminQuery(`CREATE DATABASE ${dbName}`);
    env = {
      DATABASE_URL: withDatabase(serverUrl!, dbName),
      LINKGATE_SECRET_KEY: randomBytes(32).toString("base64"),
      LINKGATE_BOOTSTRAP_API_KEY: apiKey,
      // up to three gateways share the database: they must name one issuer, or the second refuses to start
      LINKGATE_ISSUER: "http://127.0.0.1:4000",
      SMTP_URL: mailbox.smtpUrl,
      SMS_WEBHOOK_URL: mailbox.smsUrl,
      LINKGATE_WEBHOOK_ALLOW_PRIVATE: "1",
      LINKGATE_WORKER: "1",
      LINKGATE_LIMIT_SENDS_PER_ADDRESS_HOURLY: "100000",
      LINKGATE_LIMIT_EMAILS_PER_PROJECT_HOURLY: "100000",
    };
    oldDir = extractBuild(build.commit);
  }, 120_000);

  afterAll(async () => {
    await connections.destroy().catch(() => {});
    for (const p of procs) if (p.child.exitCode === null) p.child.kill("SIGTERM");
    await Promise.all(procs.map((p) => p.exited));
    await receiver?.close();
    await moved?.close();
    await mailbox?.close();
    await adminQuery(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => {});
    if (oldDir) rmSync(oldDir, { recursive: true, force: true });
    for (const dir of dataDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  const call = async (p: Proc, method: string, route: string, body?: unknown) => {
    const res = await fetch(p.base + route, {
      dispatcher: connections,
      method,
      headers: { "content-type": "application/json", "x-api-key": apiKey },
      body: body === undefined ? undefined : JSON.stringify(body),
    } as RequestInit);
    return { status: res.status, body: await res.json().catch(() => null) };
  };
  /** A whole OTP sign-in, started on `p` and finished on `q` (by default `p` too); returns the statuses it got. */
  const signIn = async (p: Proc, email: string, q: Proc = p) => (await signInFor(p, email, q)).statuses;
  const signInFor = async (p: Proc, email: string, q: Proc = p) => {
    const start = await call(p, "POST", "/auth/otp/start", { email });
    if (start.status !== 200) return { statuses: [start.status], token: "" };
    const verify = await call(q, "POST", "/auth/otp/verify", { state_id: start.body.state_id, otp: await mailbox.otp(email) });
    return { statuses: [start.status, verify.status], token: String(verify.body?.access_token ?? "") };
  };
  const viewer = async (p: Proc, token: string) => {
    const res = await fetch(p.base + "/graphql", {
      dispatcher: connections,
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": apiKey, authorization: `Bearer ${token}` },
      body: JSON.stringify({ query: "{ viewer { id } }" }),
    } as RequestInit);
    return { status: res.status, id: ((await res.json()) as { data?: { viewer?: { id?: string } } }).data?.viewer?.id };
  };
  const deliveredFor = (email: string) => receiver.receipts.some((r) => r.body.toString().includes(email));

  it("the previous build keeps serving sign-ins and deliveries while the new migrations are applied, then both builds serve side by side", async () => {
    const old = await startBuild(oldDir, env);
    procs.push(old);
    const hook = await call(old, "POST", "/graphql", {
      query: `mutation($url: String!) { createWebhook(input: { url: $url, events: ["user.created"] }) { __typename ... on CreateWebhookPayload { secret webhook { id } } } }`,
      variables: { url: receiver.url },
    });
    expect(hook.body?.data?.createWebhook?.__typename, JSON.stringify(hook.body)).toBe("CreateWebhookPayload");
    const webhookId: string = hook.body.data.createWebhook.webhook.id;
    const before = await signInFor(old, "before@example.com");
    expect(before.statuses).toEqual([200, 200]);
    await receiver.waitFor(1);

    // Traffic on the old build for as long as the migration runs.
    let migrating = true;
    const during: number[][] = [];
    const traffic = (async () => {
      for (let i = 0; migrating || i === 0; i++) during.push(await signIn(old, `during-${i}@example.com`));
    })();
    const migrated = await runMigrations(env);
    migrating = false;
    await traffic;
    expect(migrated.code, migrated.output).toBe(0);
    expect(migrated.output).toContain(build!.migration);
    expect(during.length).toBeGreaterThan(0);
    expect(during.filter((s) => s.some((code) => code !== 200))).toEqual([]);

    // The old build, on the new schema: still ready, still signing in and delivering.
    expect((await call(old, "GET", "/readyz")).status).toBe(200);
    expect(await signIn(old, "after@example.com")).toEqual([200, 200]);

    // The new build starts on the migrated database beside it, and so does a second process of
    // the old build (a replica restarting mid-rollout, or a rollback): all three serve.
    const [next, oldAgain] = await Promise.all([startBuild(repo, env), startBuild(oldDir, env)]);
    procs.push(next, oldAgain);
    expect((await call(next, "GET", "/readyz")).status).toBe(200);
    expect((await call(oldAgain, "GET", "/readyz")).status).toBe(200);
    expect(await signIn(next, "new-build@example.com"), next.output().slice(-2000)).toEqual([200, 200]);
    expect(await signIn(old, "old-beside-new@example.com")).toEqual([200, 200]);
    expect(await signIn(oldAgain, "old-restarted@example.com"), oldAgain.output().slice(-2000)).toEqual([200, 200]);

    await receiver.waitFor(5 + during.length);
    for (const email of ["before", "after", "new-build", "old-beside-new", "old-restarted"]) expect(deliveredFor(`${email}@example.com`), email).toBe(true);

    // A session of the old build is one of the new build's, and a code sent by one build is
    // checked by the other.
    expect(await viewer(next, before.token)).toEqual({ status: 200, id: expect.stringMatching(/^acc_/) });
    expect(await signIn(old, "old-to-new@example.com", next)).toEqual([200, 200]);
    expect(await signIn(next, "new-to-old@example.com", old)).toEqual([200, 200]);

    // Webhook changes beside workers of both builds: the new build's trigger tells every worker
    // on the channel (`webhook:<id>`, src/webhooks/changes.sql), which the old build's workers
    // take as a wake-up. Events after the change go to the new URL, signed with the new secret.
    const update = await call(next, "POST", "/graphql", {
      query: `mutation($id: ID!, $url: String!) { updateWebhook(id: $id, input: { url: $url }) { __typename } }`,
      variables: { id: webhookId, url: moved.url },
    });
    expect(update.body?.data?.updateWebhook?.__typename, JSON.stringify(update.body)).toBe("UpdateWebhookPayload");
    const rotated = await call(old, "POST", "/api/v1/webhooks/rotate-secret", { webhook_id: webhookId });
    expect(rotated.status, JSON.stringify(rotated.body)).toBe(200);
    const after = ["moved-old", "moved-new", "moved-restarted"];
    for (const [p, email] of [[old, after[0]], [next, after[1]], [oldAgain, after[2]]] as const) expect(await signIn(p, `${email}@example.com`)).toEqual([200, 200]);
    const arrived = await moved.waitFor(3);
    for (const email of after) {
      const r = arrived.find((x) => x.body.toString().includes(`${email}@example.com`));
      expect(r, email).toBeDefined();
      expect(verifyWebhook(r!.body, r!.headers as Record<string, string>, rotated.body.new_secret).ok, email).toBe(true);
    }

    await connections.close();
    for (const p of [old, next, oldAgain]) {
      p.child.kill("SIGTERM");
      expect(await p.exited, p.output()).toBe(0);
      expect(p.output()).not.toContain('"level":50');
    }
  }, 180_000);
});
