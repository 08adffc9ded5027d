// `linkgate/receiver` as an integrator gets it: linkgate is packed with `npm pack` (which builds
// dist/receiver through `prepare`), installed into a throw-away plain-JavaScript project, and
// examples/receiver/server.mjs, copied there, verifies real deliveries from a real linkgate:
// one receiver speaks only the legacy X-Service-Signature scheme, one only Standard Webhooks.
import { execFile, spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWorker, type DeliveryWorker } from "../src/delivery/worker.ts";
import { generateWebhookSecret } from "../src/webhooks/secrets.ts";
import { signatureHeaders } from "../src/webhooks/signing.ts";
import { CreateWebhookDocument, UpdateWebhookDocument } from "./generated/operations.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";

const run = promisify(execFile);
const repo = fileURLToPath(new URL("..", import.meta.url));
let work: string;
let project: string;
let packed: { files: string[]; stderr: string };

beforeAll(async () => {
  work = mkdtempSync(path.join(tmpdir(), "linkgate-pack-"));
  const pack = await run("npm", ["pack", "--json", "--pack-destination", work], { cwd: repo, maxBuffer: 16 * 1024 * 1024 });
  const [info] = JSON.parse(pack.stdout) as { filename: string; files: { path: string }[] }[];
  packed = { files: info.files.map((f) => f.path), stderr: pack.stderr };

  project = path.join(work, "receiver-app");
  writeFileSync(path.join(work, "package.json"), "{}\n"); // keeps npm from looking further up
  mkdirSync(project);
  writeFileSync(
    path.join(project, "package.json"),
    JSON.stringify({ name: "receiver-app", private: true, type: "module", dependencies: { linkgate: `file:../${info.filename}` } }, null, 2),
  );
  // Installed by hand, as npm lays a tarball out: its package/ folder becomes
  // node_modules/linkgate. `npm install --offline` cannot work here, because it would fetch
  // linkgate's server dependencies (Prisma, PGlite, …), which are not in this machine's npm
  // cache; and a receiver needs none of them: the receiver imports only node:crypto. Running
  // with no dependency installed at all proves exactly that.
  const target = path.join(project, "node_modules", "linkgate");
  mkdirSync(target, { recursive: true });
  await run("tar", ["-xzf", path.join(work, info.filename), "-C", target, "--strip-components=1"]);
  copyFileSync(path.join(repo, "examples/receiver/server.mjs"), path.join(project, "server.mjs"));
});

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("the packed linkgate", () => {
  it("is built on pack and ships the compiled receiver with declarations, not the test suite", () => {
    expect(packed.stderr).toContain("tsc -p tsconfig.receiver.json");
    for (const f of ["dist/receiver/receiver.js", "dist/receiver/receiver.d.ts", "dist/receiver/signing.js", "dist/receiver/secrets.js", "bin/linkgate.mjs", "package.json"]) {
      expect(packed.files).toContain(f);
    }
    expect(packed.files.filter((f) => /^(test|node_modules|bench|dashboard\/src)\/|^\.data\//.test(f))).toEqual([]);
  });

  it("a plain Node project imports linkgate/receiver (ESM, no dependencies installed)", async () => {
    const { stdout } = await run(
      process.execPath,
      ["--input-type=module", "-e", `const m = await import("linkgate/receiver"); console.log(Object.keys(m).sort().join(","))`],
      { cwd: project },
    );
    expect(stdout.trim()).toBe("WebhookVerificationError,verifyWebhook");
  });

  it("a TypeScript project type-checks against its declarations", async () => {
    writeFileSync(
      path.join(project, "check.ts"),
      [
        `import { verifyWebhook, WebhookVerificationError, type VerifyResult } from "linkgate/receiver";`,
        `const r: VerifyResult = verifyWebhook("{}", { "webhook-id": "evt_1" }, ["whsec_a"], { scheme: "standard" });`,
        `export const id: string | undefined = r.ok ? r.envelope.id : undefined;`,
        `export const status: 400 | 401 | undefined = r.ok ? undefined : r.error.status;`,
        `export const isError: boolean = !r.ok && r.error instanceof WebhookVerificationError;`,
      ].join("\n"),
    );
    writeFileSync(
      path.join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext", strict: true, noEmit: true, typeRoots: [path.join(repo, "node_modules/@types")], types: ["node"] },
        files: ["check.ts"],
      }),
    );
    const tsc = await run(process.execPath, [path.join(repo, "node_modules/typescript/bin/tsc"), "-p", project], { cwd: project }).catch((e) => e);
    expect(`${tsc.stdout ?? ""}${tsc.stderr ?? ""}`).toBe("");
  });
});

/** examples/receiver/server.mjs in the throw-away project; resolves once it listens. */
class Receiver {
  readonly lines: string[] = [];
  private waiters: (() => void)[] = [];
  private constructor(readonly child: ChildProcessWithoutNullStreams) {
    const wake = () => {
      for (const w of this.waiters.splice(0)) w();
    };
    createInterface({ input: child.stdout }).on("line", (line) => {
      this.lines.push(line);
      wake();
    });
    child.on("exit", wake);
  }

  static async start(secret: string, scheme: "legacy" | "standard"): Promise<{ receiver: Receiver; url: string }> {
    const child = spawn(process.execPath, ["server.mjs"], {
      cwd: project,
      env: { PATH: process.env.PATH, WEBHOOK_SECRETS: secret, WEBHOOK_SCHEME: scheme, HOST: "127.0.0.1", PORT: "0" },
    });
    const receiver = new Receiver(child);
    const listening = await receiver.line(/listening on (http:\/\/\S+)/);
    return { receiver, url: `${listening[1]}hooks/linkgate` };
  }

  /** The first output line matching `pattern`, waiting for it (up to 20 s). */
  line(pattern: RegExp): Promise<RegExpExecArray> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`receiver never printed ${pattern}; it printed:\n${this.lines.join("\n")}`)), 20_000);
      const check = () => {
        for (const l of this.lines) {
          const m = pattern.exec(l);
          if (m) {
            clearTimeout(timer);
            return resolve(m);
          }
        }
        if (this.child.exitCode !== null) {
          clearTimeout(timer);
          return reject(new Error(`receiver exited with ${this.child.exitCode}:\n${this.lines.join("\n")}`));
        }
        this.waiters.push(check);
      };
      check();
    });
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.child.once("exit", resolve));
    this.child.kill();
    await exited;
  }
}

describe.each(backends)("a real delivery to the packed receiver on %s", (backend) => {
  let h: Harness;
  let worker: DeliveryWorker;
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(async () => {
    await worker?.stop();
    await Promise.all(receivers.map((r) => r.stop()));
    await h?.close();
  });

  /** A webhook for user.created, then a receiver holding its secret, then the webhook aimed at it. */
  async function subscribe(scheme: "legacy" | "standard") {
    const created = await h.op(CreateWebhookDocument, { input: { url: "http://127.0.0.1:9/not-yet", events: ["user.created"], description: scheme } });
    if (created.createWebhook.__typename !== "CreateWebhookPayload") throw new Error(created.createWebhook.__typename);
    const { receiver, url } = await Receiver.start(created.createWebhook.secret, scheme);
    receivers.push(receiver);
    const updated = await h.op(UpdateWebhookDocument, { id: created.createWebhook.webhook.id, input: { url } });
    expect(updated.updateWebhook.__typename).toBe("UpdateWebhookPayload");
    return { receiver, url };
  }

  it("verifies a user.created delivery with the legacy and with the Standard Webhooks signature", async () => {
    const legacy = await subscribe("legacy");
    const standard = await subscribe("standard");
    worker = startWorker({ db: h.db, config: h.config, masterKey: h.app.deps.master, pollMs: 50 });

    const { accountId } = await h.signIn({ email: `packed-${backend}@example.com` });
    const event = await h.db.prisma.outboxEvent.findFirstOrThrow({ where: { projectId: h.projectId, eventType: "user.created" } });
    expect(event.body).toContain(accountId);

    const [viaLegacy, viaStandard] = await Promise.all([
      legacy.receiver.line(/^verified (\S+) (\S+) with the (\S+) scheme$/),
      standard.receiver.line(/^verified (\S+) (\S+) with the (\S+) scheme$/),
    ]);
    expect(viaLegacy.slice(1)).toEqual(["user.created", event.id, "legacy"]);
    expect(viaStandard.slice(1)).toEqual(["user.created", event.id, "standard"]);
    // The worker records the receivers' 200s in the background.
    await expect
      .poll(() => h.db.prisma.delivery.findMany({ where: { eventId: event.id }, select: { status: true, lastStatus: true } }), { timeout: 15_000 })
      .toEqual([
        { status: "succeeded", lastStatus: 200 },
        { status: "succeeded", lastStatus: 200 },
      ]);

    // And each one refuses a delivery signed with a secret it does not hold.
    const body = JSON.stringify({ id: "evt_forged", event_type: "user.created", created_at: new Date().toISOString(), project_id: h.projectId, data: {} });
    const forged = signatureHeaders({ body, eventId: "evt_forged", eventType: "user.created", attempt: 1, timestamp: Math.floor(Date.now() / 1000), secrets: { current: generateWebhookSecret() } });
    for (const r of [legacy, standard]) {
      const res = await fetch(r.url, { method: "POST", body, headers: forged });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: "invalid_signature" });
    }
  });
});
