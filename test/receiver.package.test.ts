// @linkgate/receiver as an integrator gets it: the workspace is packed with `npm pack`, the
// tarball is installed with a plain `npm install` (scripts on) into an empty project, and plain
// Node scripts there `require()` and `import()` it. They verify the package's own test vectors
// and real deliveries from a real linkgate, as does examples/receiver/server.mjs copied there
// (one copy speaks only the legacy X-Service-Signature scheme, one only Standard Webhooks) and
// the Python snippet of docs/receiver.md, run with python3 as printed there.
import { execFile, spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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
import { TestReceiver } from "./support/receiver.ts";

const run = promisify(execFile);
const repo = fileURLToPath(new URL("..", import.meta.url));
let work: string;
let project: string;
let packed: { filename: string; files: string[] };

beforeAll(async () => {
  work = mkdtempSync(path.join(tmpdir(), "linkgate-receiver-pack-"));
  const pack = await run("npm", ["pack", "--json", "--pack-destination", work, "-w", "@linkgate/receiver"], { cwd: repo, maxBuffer: 16 * 1024 * 1024 });
  // prepack's tsc output precedes npm's JSON on stdout.
  const [info] = JSON.parse(pack.stdout.slice(pack.stdout.indexOf("\n[") + 1)) as { filename: string; files: { path: string }[] }[];
  packed = { filename: info.filename, files: info.files.map((f) => f.path).sort() };

  project = path.join(work, "receiver-app");
  mkdirSync(project);
  writeFileSync(path.join(project, "package.json"), JSON.stringify({ name: "receiver-app", private: true, type: "module" }, null, 2));
  // No dependencies to fetch, so --offline proves it needs nothing but the tarball.
  await run("npm", ["install", "--offline", "--no-audit", "--no-fund", path.join(work, info.filename)], { cwd: project });
  copyFileSync(path.join(repo, "examples/receiver/server.mjs"), path.join(project, "server.mjs"));
  writeFileSync(path.join(project, "verify.cjs"), VERIFY_SCRIPT.require);
  writeFileSync(path.join(project, "verify.mjs"), VERIFY_SCRIPT.import);
  writeFileSync(path.join(project, "verify.py"), `${pythonSnippet()}\n${PYTHON_DRIVER}`);
});

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** One signed request for the verifiers below: the raw body as base64, the headers, what to hold. */
type Case = { name: string; body: string; headers: Record<string, string>; secrets: string[]; scheme: "legacy" | "standard"; nowMs: number };
type Outcome = { name: string; ok: boolean; code?: string };

const CHECK = `(cases, { verifyWebhook, WebhookVerificationError }) => cases.map((c) => {
  const r = verifyWebhook(Buffer.from(c.body, "base64"), c.headers, c.secrets, { scheme: c.scheme, now: () => c.nowMs });
  if (!r.ok && !(r.error instanceof WebhookVerificationError)) throw new Error("not a WebhookVerificationError");
  return r.ok ? { name: c.name, ok: true } : { name: c.name, ok: false, code: r.error.code };
})`;

/** Plain Node scripts that load the installed package with `require()` or `import()`. */
const VERIFY_SCRIPT = {
  require: `const { readFileSync } = require("node:fs");
const check = ${CHECK};
console.log(JSON.stringify(check(JSON.parse(readFileSync(process.argv[2], "utf8")), require("@linkgate/receiver"))));
`,
  import: `import { readFileSync } from "node:fs";
const check = ${CHECK};
console.log(JSON.stringify(check(JSON.parse(readFileSync(process.argv[2], "utf8")), await import("@linkgate/receiver"))));
`,
};

/** The one ```python block of docs/receiver.md, exactly as a reader copies it. */
function pythonSnippet(): string {
  const doc = readFileSync(path.join(repo, "docs/receiver.md"), "utf8");
  const blocks = [...doc.matchAll(/^```python\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
  expect(blocks).toHaveLength(1);
  return blocks[0];
}

const PYTHON_DRIVER = `
import json, sys
out = []
for c in json.load(open(sys.argv[1])):
    body = base64.b64decode(c["body"])
    headers = {k.lower(): v for k, v in c["headers"].items()}
    if c["scheme"] == "legacy":
        ok = verify_legacy(body, headers, c["secrets"])
    else:
        ok = verify_standard(body, headers, c["secrets"], now=c["nowMs"] / 1000)
    out.append({"name": c["name"], "ok": ok})
print(json.dumps(out))
`;

async function verifyWith(runner: "require" | "import" | "python", cases: Case[]): Promise<Outcome[]> {
  const file = path.join(work, `cases-${runner}-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify(cases));
  const [cmd, script] = runner === "python" ? ["python3", "verify.py"] : [process.execPath, runner === "require" ? "verify.cjs" : "verify.mjs"];
  const { stdout } = await run(cmd, [script, file], { cwd: project });
  return JSON.parse(stdout) as Outcome[];
}

/** Every way one signed request must verify, and the ways it must not. */
function casesFor(name: string, body: Buffer, headers: Record<string, string>, held: { current: string; previous?: string }, nowMs: number): { cases: Case[]; expected: Outcome[] } {
  const cases: Case[] = [];
  const expected: Outcome[] = [];
  const add = (label: string, b: Buffer, secrets: string[], scheme: "legacy" | "standard", ok: boolean, code?: string) => {
    cases.push({ name: `${name} ${scheme} ${label}`, body: b.toString("base64"), headers, secrets, scheme, nowMs });
    expected.push({ name: `${name} ${scheme} ${label}`, ok, ...(code ? { code } : {}) });
  };
  const tampered = Buffer.from(body);
  tampered[tampered.length - 2] ^= 1;
  for (const scheme of ["legacy", "standard"] as const) {
    add("current secret", body, [held.current], scheme, true);
    if (held.previous) add("previous secret", body, [held.previous], scheme, true);
    add("another secret", body, [generateWebhookSecret()], scheme, false, "invalid_signature");
    add("tampered body", tampered, [held.current], scheme, false, "invalid_signature");
  }
  return { cases, expected };
}

/** The vectors shipped in the installed package, as verifier cases. */
function vectorCases() {
  const file = path.join(project, "node_modules/@linkgate/receiver/vectors/webhook-signatures.json");
  const vectors = JSON.parse(readFileSync(file, "utf8")) as {
    cases: { name: string; body: string; webhook_id: string; webhook_timestamp: string; current_secret: string; previous_secret: string; headers_outside_transition: Record<string, string>; headers_during_transition: Record<string, string> }[];
  };
  expect(vectors.cases.length).toBeGreaterThan(0);
  const all = { cases: [] as Case[], expected: [] as Outcome[] };
  for (const v of vectors.cases) {
    const common = { "webhook-id": v.webhook_id, "webhook-timestamp": v.webhook_timestamp };
    const nowMs = Number(v.webhook_timestamp) * 1000;
    for (const [label, headers, held] of [
      ["outside a transition", v.headers_outside_transition, { current: v.current_secret }],
      ["during a transition", v.headers_during_transition, { current: v.current_secret, previous: v.previous_secret }],
    ] as const) {
      const c = casesFor(`${v.name} ${label}`, Buffer.from(v.body, "utf8"), { ...common, ...headers }, held, nowMs);
      all.cases.push(...c.cases);
      all.expected.push(...c.expected);
    }
  }
  return all;
}

describe("the packed @linkgate/receiver", () => {
  it("ships its ESM and CommonJS builds, declarations, README and test vectors, nothing else", () => {
    expect(packed.filename).toBe("linkgate-receiver-0.3.0.tgz");
    expect(packed.files).toEqual([
      "README.md",
      "dist/cjs/index.d.ts",
      "dist/cjs/index.js",
      "dist/cjs/package.json",
      "dist/esm/index.d.ts",
      "dist/esm/index.js",
      "package.json",
      "vectors/webhook-signatures.json",
    ]);
  });

  it("installs with plain npm install and brings no other package", () => {
    expect(readdirSync(path.join(project, "node_modules")).sort()).toEqual([".package-lock.json", "@linkgate"]);
    expect(readdirSync(path.join(project, "node_modules/@linkgate"))).toEqual(["receiver"]);
    const manifest = JSON.parse(readFileSync(path.join(project, "node_modules/@linkgate/receiver/package.json"), "utf8"));
    expect(manifest.dependencies).toBeUndefined();
    expect(manifest.engines).toEqual({ node: ">=18" });
    expect(JSON.parse(readFileSync(path.join(project, "package.json"), "utf8")).dependencies).toEqual({ "@linkgate/receiver": `file:../${packed.filename}` });
  });

  it.each(["require", "import"] as const)("loaded with %s(), verifies every test vector and refuses a wrong secret or a changed byte", async (how) => {
    const { cases, expected } = vectorCases();
    expect(await verifyWith(how, cases)).toEqual(expected);
  });

  it("the Python snippet of docs/receiver.md verifies every test vector and refuses a wrong secret or a changed byte", async () => {
    const { cases, expected } = vectorCases();
    expect(await verifyWith("python", cases)).toEqual(expected.map(({ name, ok }) => ({ name, ok })));
  });

  // An application whose own code imports the package while one of its dependencies requires it
  // gets both builds in one process: a failure from either is an instance of the other's class.
  it("a WebhookVerificationError from the CommonJS build is an instance of the ESM build's class, and the reverse", async () => {
    writeFileSync(
      path.join(project, "dual.mjs"),
      `import { createRequire } from "node:module";
const esm = await import("@linkgate/receiver");
const cjs = createRequire(import.meta.url)("@linkgate/receiver");
const failed = (m) => m.verifyWebhook("{}", {}, ${JSON.stringify(generateWebhookSecret())}).error;
class Mine extends esm.WebhookVerificationError {}
console.log(JSON.stringify({
  twoBuilds: esm.verifyWebhook !== cjs.verifyWebhook && esm.WebhookVerificationError !== cjs.WebhookVerificationError,
  cjsInEsm: failed(cjs) instanceof esm.WebhookVerificationError,
  esmInCjs: failed(esm) instanceof cjs.WebhookVerificationError,
  code: failed(cjs).code,
  notAnyError: new Error("x") instanceof esm.WebhookVerificationError,
  subclassStaysNarrow: failed(cjs) instanceof Mine,
  subclassOwn: new Mine("invalid_signature", "x") instanceof Mine && new Mine("invalid_signature", "x") instanceof cjs.WebhookVerificationError,
}));
`,
    );
    const { stdout } = await run(process.execPath, ["dual.mjs"], { cwd: project });
    expect(JSON.parse(stdout)).toEqual({ twoBuilds: true, cjsInEsm: true, esmInCjs: true, code: "missing_signature", notAnyError: false, subclassStaysNarrow: false, subclassOwn: true });
  });

  // An outside review: any WEBHOOK_SCHEME but the three names behaved like `any`, so a month-old
  // delivery replayed with only its X-Service-Signature header was accepted.
  it.each(["Standard", "standard ", "", "strict"])("examples/receiver/server.mjs refuses to start with WEBHOOK_SCHEME=%j", async (scheme) => {
    const r = await run(process.execPath, ["server.mjs"], {
      cwd: project,
      timeout: 20_000,
      env: { PATH: process.env.PATH, WEBHOOK_SECRETS: generateWebhookSecret(), WEBHOOK_SCHEME: scheme, HOST: "127.0.0.1", PORT: "0" },
    }).catch((e: { code?: number; stdout: string; stderr: string; killed?: boolean }) => e);
    expect("code" in r ? r.code : 0).toBe(1);
    expect(r.stderr).toMatch(/"standard", "legacy" or "any"/);
    expect(r.stdout).not.toMatch(/listening/);
  });

  it("examples/receiver/server.mjs refuses to start with a malformed secret, and does not print it", async () => {
    const r = await run(process.execPath, ["server.mjs"], {
      cwd: project,
      timeout: 20_000,
      env: { PATH: process.env.PATH, WEBHOOK_SECRETS: "whsec_ab!!cdEFGH", HOST: "127.0.0.1", PORT: "0" },
    }).catch((e: { code?: number; stdout: string; stderr: string }) => e);
    expect("code" in r ? r.code : 0).toBe(1);
    expect(r.stderr).toMatch(/base64/);
    expect(r.stderr).not.toContain("ab!!cdEFGH");
  });

  it("a TypeScript project type-checks against its declarations, from ESM and from CommonJS, without @types/node", async () => {
    const lines = (from: string) => [
      from,
      `const r: VerifyResult = verifyWebhook("{}", { "webhook-id": "evt_1" }, ["whsec_a"], { scheme: "standard" });`,
      `export const id: string | undefined = r.ok ? r.envelope.id : undefined;`,
      `export const status: 400 | 401 | undefined = r.ok ? undefined : r.error.status;`,
      `export const index: number | undefined = r.ok ? r.secretIndex : undefined;`,
      `export const fromArrayBuffer = verifyWebhook(new ArrayBuffer(2), {}, "whsec_a");`,
      `export const isError: boolean = !r.ok && r.error instanceof WebhookVerificationError;`,
      `export const fromBytes = verifyWebhook(new Uint8Array(2), { get: (name: string) => name }, "whsec_a");`,
    ];
    writeFileSync(path.join(project, "check.mts"), lines(`import { verifyWebhook, WebhookVerificationError, type VerifyResult } from "@linkgate/receiver";`).join("\n"));
    writeFileSync(path.join(project, "check.cts"), lines(`import { verifyWebhook, WebhookVerificationError, type VerifyResult } from "@linkgate/receiver";`).join("\n"));
    const tsc = path.join(repo, "node_modules/typescript/bin/tsc");
    // one tsconfig per resolution, checked side by side: each tsc is seconds of one core here
    const checked = await Promise.all(
      ([["NodeNext", ["check.mts", "check.cts"]], ["Node10", ["check.mts"]]] as const).map(async ([resolution, files]) => {
        const config = path.join(project, `tsconfig.${resolution.toLowerCase()}.json`);
        writeFileSync(
          config,
          JSON.stringify({ compilerOptions: { module: resolution === "Node10" ? "ESNext" : "NodeNext", moduleResolution: resolution, strict: true, noEmit: true, lib: ["ES2022"], types: [] }, files }),
        );
        const r = await run(process.execPath, [tsc, "-p", config], { cwd: project }).catch((e) => e);
        return { resolution, output: `${r.stdout ?? ""}${r.stderr ?? ""}` };
      }),
    );
    for (const { resolution, output } of checked) expect(output, resolution).toBe("");
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

describe.each(backends)("a real delivery to the installed package on %s", (backend) => {
  let h: Harness;
  let worker: DeliveryWorker;
  const receivers: Receiver[] = [];
  let capture: TestReceiver;

  beforeAll(async () => {
    h = await startHarness(backend);
    capture = await TestReceiver.start();
  });
  afterAll(async () => {
    await worker?.stop();
    await Promise.all(receivers.map((r) => r.stop()));
    await capture?.close();
    await h?.close();
  });

  async function createWebhook(description: string) {
    const created = await h.op(CreateWebhookDocument, { input: { url: "http://127.0.0.1:9/not-yet", events: ["user.created"], description } });
    if (created.createWebhook.__typename !== "CreateWebhookPayload") throw new Error(created.createWebhook.__typename);
    return { id: created.createWebhook.webhook.id, secret: created.createWebhook.secret };
  }
  async function aim(id: string, url: string) {
    const updated = await h.op(UpdateWebhookDocument, { id, input: { url } });
    expect(updated.updateWebhook.__typename).toBe("UpdateWebhookPayload");
  }
  /** A webhook for user.created, then the example receiver holding its secret, then the webhook aimed at it. */
  async function subscribe(scheme: "legacy" | "standard") {
    const { id, secret } = await createWebhook(scheme);
    const { receiver, url } = await Receiver.start(secret, scheme);
    receivers.push(receiver);
    await aim(id, url);
    return { receiver, url };
  }

  it("the example receiver verifies a user.created delivery with the legacy and with the Standard Webhooks signature; require(), import() and the Python snippet verify the captured bytes", async () => {
    const [legacy, standard] = await Promise.all([subscribe("legacy"), subscribe("standard")]);
    const captured = await createWebhook("captured");
    await aim(captured.id, capture.url);
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
        { status: "succeeded", lastStatus: 200 },
      ]);

    // The bytes and headers exactly as linkgate sent them, verified outside the gateway.
    const [receipt] = await capture.waitFor(1);
    expect(receipt.headers["webhook-id"]).toBe(event.id);
    const headers = Object.fromEntries(Object.entries(receipt.headers).map(([k, v]) => [k, String(v)]));
    const { cases, expected } = casesFor("delivery", receipt.body, headers, { current: captured.secret }, Date.now());
    const [viaRequire, viaImport, viaPython] = await Promise.all((["require", "import", "python"] as const).map((runner) => verifyWith(runner, cases)));
    expect(viaRequire).toEqual(expected);
    expect(viaImport).toEqual(expected);
    expect(viaPython).toEqual(expected.map(({ name, ok }) => ({ name, ok })));

    // And each example receiver refuses a delivery signed with a secret it does not hold.
    const body = JSON.stringify({ id: "evt_forged", event_type: "user.created", created_at: new Date().toISOString(), project_id: h.projectId, data: {} });
    const forged = signatureHeaders({ body, eventId: "evt_forged", eventType: "user.created", attempt: 1, timestamp: Math.floor(Date.now() / 1000), secrets: { current: generateWebhookSecret() } });
    for (const r of [legacy, standard]) {
      const res = await fetch(r.url, { method: "POST", body, headers: forged });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: "invalid_signature" });
    }
  });
});
