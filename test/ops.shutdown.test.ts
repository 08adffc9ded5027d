// Stopping `npm start` and `npm run worker` for real: SIGTERM still stops a process whose
// stdout and stderr readers have gone away, a request in flight is answered even to a client
// that half-closed its connection, and a drain stuck on a receiver that never answers ends at
// LINKGATE_SHUTDOWN_TIMEOUT_MS with the delivery handed back in the database.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { createServer, type ServerResponse } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parseMasterKey } from "../src/crypto.ts";
import { startWorker, type DeliveryWorker } from "../src/delivery/worker.ts";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";
import { lastAnswer } from "./support/raw-http.ts";
import { enqueueEvents, eventually, seedWebhook, TestReceiver } from "./support/receiver.ts";
import { MAIN, migratedDataDir, WORKER } from "./support/server-entry.ts";

const ROOT = path.resolve(import.meta.dirname, "..");

const COMMANDS = [
  { name: "npm start", entry: MAIN, ready: "linkgate listening" },
  { name: "npm run worker", entry: WORKER, ready: "delivery worker running" },
];

const baseEnv = () => ({
  PATH: process.env.PATH ?? "",
  PORT: "0",
  LINKGATE_DATA_DIR: migratedDataDir("linkgate-shutdown-"),
});

/** On Postgres the data folder holds nothing the process reads: no copy of the PGlite cluster. */
const postgresEnv = (databaseUrl: string) => ({
  PATH: process.env.PATH ?? "",
  PORT: "0",
  LINKGATE_DATA_DIR: mkdtempSync(path.join(tmpdir(), "linkgate-shutdown-")),
  DATABASE_URL: databaseUrl,
});

/** Whether a process (not necessarily our child) still runs; a zombie has finished. */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

async function waitUntilGone(pid: number, timeoutMs: number): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (!running(pid)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return !running(pid);
}

/**
 * The parent in the issue: starts the command with stdout and stderr piped to itself, reads
 * until the ready line, prints the command's pid and exits, so both pipes lose their reader.
 */
const INTERMEDIATE = `
const { spawn } = require("node:child_process");
const [entry, ready] = process.argv.slice(1);
const child = spawn(process.execPath, [entry], { stdio: ["ignore", "pipe", "pipe"], detached: true });
let seen = "";
const onData = (chunk) => {
  seen += chunk;
  if (seen.includes(ready)) {
    process.stdout.write(child.pid + "\\n");
    process.exit(0);
  }
};
child.stdout.on("data", onData);
child.stderr.on("data", onData);
child.on("exit", (code) => { process.stderr.write("exited early (" + code + "): " + seen); process.exit(2); });
`;

async function startOrphaned(entry: string, ready: string, env: Record<string, string>): Promise<number> {
  const parent = spawn(process.execPath, ["-e", INTERMEDIATE, entry, ready], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  parent.stdout.on("data", (c) => (out += c));
  parent.stderr.on("data", (c) => (err += c));
  const code = await new Promise<number | null>((resolve) => parent.on("exit", resolve));
  expect(code, err).toBe(0);
  const pid = Number(out.trim());
  expect(pid, out + err).toBeGreaterThan(0);
  return pid;
}

describe("SIGTERM after the reader of stdout and stderr has gone", () => {
  const pids: number[] = [];
  afterEach(() => {
    for (const pid of pids.splice(0)) if (running(pid)) process.kill(pid, "SIGKILL");
  });

  it.each(COMMANDS)("$name exits within a few seconds", async ({ entry, ready }) => {
    const pid = await startOrphaned(entry, ready, baseEnv());
    pids.push(pid);
    expect(running(pid)).toBe(true);
    process.kill(pid, "SIGTERM");
    expect(await waitUntilGone(pid, 10_000), `pid ${pid} still runs 10 s after SIGTERM`).toBe(true);
  });
});

type Proc = { child: ChildProcess; exited: Promise<number | null>; output: () => string; waitFor: (text: string) => Promise<void> };

function start(entry: string, env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [entry], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.on("data", (c) => (out += c));
  child.stderr!.on("data", (c) => (out += c));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const waitFor = async (text: string) => {
    let done = false;
    void exited.then(() => (done = true));
    await eventually(async () => out.includes(text) || done, 60_000, `"${text}" in the output`);
    expect(out, out).toContain(text);
  };
  return { child, exited, output: () => out, waitFor };
}

/** An SMS gateway that holds every text until the test answers it: a request kept in flight, on cue. */
async function heldSmsGateway() {
  const held: ServerResponse[] = [];
  let arrived: (() => void) | undefined;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => (held.push(res), arrived?.()));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/sms`,
    /** The next text to arrive, unanswered. */
    async nextText(): Promise<ServerResponse> {
      if (!held.length) await new Promise<void>((resolve) => (arrived = resolve));
      return held.shift()!;
    },
    close: () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

/**
 * Writes the whole request, then half-closes (FIN) and goes on reading, as `socket.end(request)`
 * does: `sent` once the FIN has left, `answer` with all the server wrote until it closed.
 */
function sendThenHalfClose(port: number, request: string): { sent: Promise<void>; answer: Promise<string> } {
  const socket = connect(port, "127.0.0.1");
  socket.setEncoding("latin1");
  socket.on("error", () => {}); // a reset ends the answer as a close does
  let raw = "";
  socket.on("data", (c: string) => (raw += c));
  const answer = new Promise<string>((resolve) => socket.on("close", () => resolve(raw)));
  const sent = new Promise<void>((resolve) => socket.once("connect", () => socket.end(request, () => resolve())));
  return { sent, answer };
}

// Node's HTTP server ends its side of a connection as soon as the client's side ends, answer or
// not: a client that half-closed after its request (socket.end()) was cut off, with nothing,
// whenever its request was still being served, and a drain is when a request still is.
describe("a client that half-closes its connection after its request (docs/rest.md, Conventions)", () => {
  const apiKey = `lg_sk_test_${randomBytes(24).toString("base64url")}`;
  const procs: Proc[] = [];
  const cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const p of procs.splice(0)) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
    for (const c of cleanup.splice(0)) await c();
  });

  /** `npm start` whose texts go to a gateway that holds them: a sign-in by phone is in flight until the test answers its text. */
  async function startWithHeldTexts() {
    const gateway = await heldSmsGateway();
    cleanup.push(() => gateway.close());
    const p = start(MAIN, { ...baseEnv(), LINKGATE_BOOTSTRAP_API_KEY: apiKey, SMS_WEBHOOK_URL: gateway.url, LINKGATE_SHUTDOWN_TIMEOUT_MS: "20000" });
    procs.push(p);
    await p.waitFor("linkgate listening");
    const port = Number(/listening on http:\/\/[^:]+:(\d+)/.exec(p.output())![1]);
    const body = JSON.stringify({ phone: "+14155550143" });
    const signIn = () =>
      sendThenHalfClose(port, `POST /auth/otp/start HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    return { p, gateway, signIn, port };
  }

  function expectSignInStarted(raw: string) {
    const answer = lastAnswer(raw);
    expect(answer.status, raw || "(the connection closed with no answer)").toBe(200);
    expect(Buffer.byteLength(answer.body, "latin1"), raw).toBe(Number(answer.headers["content-length"]));
    expect(JSON.parse(answer.body)).toEqual({ state_id: expect.stringMatching(/^otp_/) });
  }

  it("npm start: gets the whole answer of a request served after its FIN arrived", async () => {
    const { gateway, signIn } = await startWithHeldTexts();
    const { sent, answer } = signIn();
    await sent;
    (await gateway.nextText()).writeHead(202).end();
    expectSignInStarted(await answer);
  }, 60_000);

  it("npm start: gets the whole answer of a request in flight when SIGTERM arrives, and the process exits 0", async () => {
    const { p, gateway, signIn } = await startWithHeldTexts();
    const { sent, answer } = signIn();
    await sent;
    const text = await gateway.nextText();
    p.child.kill("SIGTERM");
    await p.waitFor("draining");
    text.writeHead(202).end();
    expectSignInStarted(await answer);
    expect(await p.exited, p.output()).toBe(0);
  }, 60_000);

  // 33rd review: Node ends the connection after that answer, which said keep-alive, so a client
  // that sent its next request on it had it cut off with nothing
  it("npm start: a keep-alive client's request in flight when SIGTERM arrives is answered with Connection: close", async () => {
    const { p, gateway, port } = await startWithHeldTexts();
    const body = JSON.stringify({ phone: "+14155550143" });
    const socket = connect(port, "127.0.0.1");
    socket.setEncoding("latin1");
    socket.on("error", () => {});
    let raw = "";
    socket.on("data", (c: string) => (raw += c));
    const answer = new Promise<string>((resolve) => socket.on("close", () => resolve(raw)));
    socket.write(`POST /auth/otp/start HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    const text = await gateway.nextText();
    p.child.kill("SIGTERM");
    await p.waitFor("draining");
    text.writeHead(202).end();
    const got = await answer;
    expectSignInStarted(got);
    expect(lastAnswer(got).headers["connection"], got).toBe("close");
    expect(await p.exited, p.output()).toBe(0);
  }, 60_000);
});

// 35th review: Node's server.close() ends every idle keep-alive connection at once, so a request
// a client (a load balancer, a connection pool) sent on one just as SIGTERM arrived was cut off
// with nothing, in every roll-out. Idle connections now stay until their next answer (which
// says Connection: close) or until they have been idle for the keep-alive timeout the server
// announced, after which clients no longer reuse them.
describe("a keep-alive connection idle when SIGTERM arrives (docs/configuration.md, Shutdown)", () => {
  it("npm start: its next request is answered, with Connection: close, and the process exits 0", async () => {
    const p = start(MAIN, baseEnv());
    try {
      await p.waitFor("linkgate listening");
      const port = Number(/listening on http:\/\/[^:]+:(\d+)/.exec(p.output())![1]);
      const socket = connect(port, "127.0.0.1");
      socket.setEncoding("latin1");
      socket.on("error", () => {});
      let raw = "";
      let answered: (() => void) | undefined;
      socket.on("data", (c: string) => {
        raw += c;
        if (/\r\n\r\n[\s\S]*\}$/.test(raw)) answered?.();
      });
      const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
      const ask = () =>
        new Promise<string>((resolve) => {
          raw = "";
          answered = () => resolve(raw);
          void closed.then(() => resolve(raw));
          socket.write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        });
      const first = await ask();
      expect(lastAnswer(first).status, first).toBe(200);
      expect(lastAnswer(first).headers["connection"], first).toBe("keep-alive");

      p.child.kill("SIGTERM");
      await p.waitFor("draining");
      const second = await ask();
      expect(lastAnswer(second).status, second || "(the connection closed with no answer)").toBe(200);
      expect(lastAnswer(second).headers["connection"], second).toBe("close");
      await closed;
      expect(await p.exited, p.output()).toBe(0);
    } finally {
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
    }
  }, 60_000);
});

const postgres = backends.includes("postgres");

describe.skipIf(!postgres)(`the shutdown deadline${postgres ? "" : " (skipped: needs TEST_DATABASE_URL)"}`, () => {
  const DEADLINE_MS = 1_500;
  const secretKey = randomBytes(32).toString("base64");
  const masterKey = parseMasterKey(secretKey);
  let db: TestDatabase;
  const procs: Proc[] = [];
  const cleanup: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    db = await openTestDatabase("postgres");
  });
  afterEach(async () => {
    for (const p of procs.splice(0)) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
    for (const c of cleanup.splice(0)) await c();
  });
  afterAll(async () => {
    await db?.close();
  });

  it.each(COMMANDS)(
    "$name: a delivery stuck at a silent receiver is released at the deadline and the exit code is 1",
    async ({ entry, ready }) => {
      const silent = await TestReceiver.start({ delayMs: 10 * 60_000 });
      cleanup.push(() => silent.close());
      const hook = await seedWebhook(db, masterKey, { url: silent.url });

      const p = start(entry, {
        ...postgresEnv(db.url!),
        LINKGATE_SECRET_KEY: secretKey,
        LINKGATE_WEBHOOK_ALLOW_PRIVATE: "1",
        LINKGATE_WEBHOOK_TIMEOUT_MS: "120000",
        LINKGATE_SHUTDOWN_TIMEOUT_MS: String(DEADLINE_MS),
      });
      procs.push(p);
      await p.waitFor(ready);
      const [eventId] = await enqueueEvents(db, hook.projectId, 1);
      await silent.waitFor(1, 30_000);
      const where = { eventId_webhookId: { eventId, webhookId: hook.webhookId } };
      expect(await db.prisma.delivery.findUniqueOrThrow({ where })).toMatchObject({ status: "pending", leasedBy: expect.any(String) });

      const sentAt = Date.now();
      p.child.kill("SIGTERM");
      const code = await p.exited;
      const tookMs = Date.now() - sentAt;
      expect(code, p.output()).toBe(1);
      expect(tookMs, p.output()).toBeGreaterThanOrEqual(DEADLINE_MS - 50);
      expect(tookMs, p.output()).toBeLessThan(DEADLINE_MS + 4_000);
      expect(p.output()).toContain("the shutdown deadline (1500 ms) passed");

      // Handed back untouched: no attempt counted, no lease, due now.
      const d = await db.prisma.delivery.findUniqueOrThrow({ where, include: { attemptLog: true } });
      expect(d).toMatchObject({ status: "pending", attempts: 0, leasedBy: null, leaseUntil: null });
      expect(d.attemptLog).toEqual([]);
      expect(d.nextAttemptAt.getTime()).toBeLessThanOrEqual(Date.now());

      // So another worker sends it at once rather than after the old lease (150 s) runs out.
      silent.setFallback({ status: 200 });
      const other: DeliveryWorker = startWorker({ db, masterKey, config: { retryScheduleMs: [100], webhookTimeoutMs: 2_000, webhookAllowPrivate: true }, pollMs: 100, maintenanceIntervalMs: 0 });
      cleanup.push(() => other.stop());
      const done = await eventually(async () => {
        const x = await db.prisma.delivery.findUniqueOrThrow({ where });
        return x.status === "succeeded" ? x : null;
      }, 10_000, "another worker to deliver it");
      expect(done.attempts).toBe(1);
    },
    90_000,
  );

  // 31st review: npm start stopped its worker only once HTTP had drained, so with a slow request
  // in flight the worker went on claiming (36 attempts after "draining", 12 before)
  it("npm start: stops claiming at SIGTERM while a request still drains", async () => {
    const receiver = await TestReceiver.start({ status: 200 });
    cleanup.push(() => receiver.close());
    const hook = await seedWebhook(db, masterKey, { url: receiver.url });
    const p = start(MAIN, { ...postgresEnv(db.url!), LINKGATE_SECRET_KEY: secretKey, LINKGATE_WEBHOOK_ALLOW_PRIVATE: "1", LINKGATE_SHUTDOWN_TIMEOUT_MS: "20000" });
    procs.push(p);
    await p.waitFor("linkgate listening");
    const port = Number(/listening on http:\/\/[^:]+:(\d+)/.exec(p.output())![1]);

    // a request whose body is still arriving (/graphql reads it before any credential): the
    // server's close waits for it
    const body = JSON.stringify({ query: "{ __typename }" });
    const socket = connect(port, "127.0.0.1");
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write(`POST /graphql HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`);
    const answered = new Promise<string>((resolve) => {
      let text = "";
      socket.on("data", (c) => (text += c));
      socket.on("close", () => resolve(text));
    });

    p.child.kill("SIGTERM");
    await p.waitFor("draining");
    const [eventId] = await enqueueEvents(db, hook.projectId, 1);
    await new Promise((r) => setTimeout(r, 1_000)); // the window in which a worker still claiming would send it
    socket.write(body.slice(5));
    expect(await answered).toMatch(/^HTTP\/1\.1 \d{3}/);
    expect(await p.exited, p.output()).toBe(0);

    expect(receiver.receipts).toHaveLength(0);
    const d = await db.prisma.delivery.findUniqueOrThrow({ where: { eventId_webhookId: { eventId, webhookId: hook.webhookId } }, include: { attemptLog: true } });
    expect(d).toMatchObject({ status: "pending", attempts: 0, leasedBy: null });
    expect(d.attemptLog).toEqual([]);
  }, 60_000);
});
