// A client that retries a verify with the right code (a timeout, a double tap, a flaky
// network sending the same request many times) gets the same success every time, and a right
// code never counts as a wrong one: on Postgres the retries arrive at two processes at once.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { MAIN } from "./support/server-entry.ts";

const N = 60;

type Caller = (path: string, body: object, headers?: Record<string, string>) => Promise<{ status: number; body: any }>;

/** A second linkgate process on the same database, keys and master key as the harness. */
async function secondProcess(h: Harness): Promise<{ child: ChildProcess; call: Caller }> {
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH,
      PORT: "0",
      LOG_LEVEL: "info",
      DATABASE_URL: h.db.url!,
      LINKGATE_DATA_DIR: mkdtempSync(path.join(tmpdir(), "linkgate-second-")),
      LINKGATE_SECRET_KEY: h.config.secretKey!,
      LINKGATE_BOOTSTRAP_API_KEY: h.apiKey,
      LINKGATE_ISSUER: h.app.deps.keys.issuer,
      LINKGATE_WORKER: "0",
      SMTP_URL: h.config.smtpUrl!,
      SMS_WEBHOOK_URL: h.config.smsWebhookUrl!,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (c) => (out += c));
  child.stderr!.on("data", (c) => (out += c));
  for (let i = 0; i < 600 && !/"port":(\d+)/.test(out); i++) await new Promise((r) => setTimeout(r, 100));
  const port = Number(/"port":(\d+)/.exec(out)?.[1]);
  if (!port) throw new Error(`second process did not start:\n${out}`);
  const call: Caller = async (p, body, headers = {}) => {
    const res = await fetch(`http://127.0.0.1:${port}${p}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": h.apiKey, ...headers },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  };
  return { child, call };
}

describe.each(backends)("verifies retried with the right code on %s", (backend) => {
  let h: Harness;
  let second: { child: ChildProcess; call: Caller } | undefined;
  beforeAll(async () => {
    h = await startHarness(backend);
    if (backend === "postgres") second = await secondProcess(h);
  });
  afterAll(async () => {
    second?.child.kill("SIGTERM");
    await h?.close();
  });

  const local: Caller = (p, body, headers) => h.call("POST", p, { body, headers });
  /** Half the calls to this process, half to the other one when there is one. */
  const callers = (): Caller[] => (second ? [local, second.call] : [local]);
  const fanOut = (p: string, body: object, headers?: Record<string, string>) =>
    Promise.all(Array.from({ length: N }, (_, i) => callers()[i % callers().length](p, body, headers)));

  it(`${N} concurrent link verifies of one state: all the same success, no try used, no failure counted`, async () => {
    const user = await h.signIn({ email: "retrier@example.com" });
    const auth = { authorization: `Bearer ${user.token}` };
    const req = await h.call("POST", "/users/link/request", { body: { email: "retried-new@example.com" }, headers: auth });
    const otp = await h.mailbox.otp("retried-new@example.com");
    const results = await fanOut("/users/link/verify", { state_id: req.body.state_id, otp }, auth);
    for (const r of results) expect(r, JSON.stringify(r.body)).toMatchObject({ status: 200, body: { outcome: "attached", message: "Account linked successfully" } });
    const state = await h.db.prisma.otpState.findUniqueOrThrow({ where: { id: req.body.state_id } });
    expect(state.attempts).toBe(0);
    expect(await h.db.prisma.rateLimit.count({ where: { key: { startsWith: "fail:" } } })).toBe(0);
    expect(await h.db.prisma.identifier.count({ where: { value: "retried-new@example.com" } })).toBe(1);
    expect(await h.db.prisma.outboxEvent.count({ where: { eventType: "user.identifier.linked" } })).toBe(1);
  });

  it(`${N} concurrent sign-in verifies of one state: one account, one session, the same sid in every token`, async () => {
    const start = await h.call("POST", "/auth/otp/start", { body: { email: "double-tap@example.com" } });
    const otp = await h.mailbox.otp("double-tap@example.com");
    const results = await fanOut("/auth/otp/verify", { state_id: start.body.state_id, otp });
    for (const r of results) expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(new Set(results.map((r) => r.body.account_id)).size).toBe(1);
    expect(new Set(results.map((r) => decodeJwt(r.body.access_token).sid)).size).toBe(1);
    const accountId = results[0].body.account_id;
    expect(await h.db.prisma.session.count({ where: { accountId } })).toBe(1);
    expect(await h.db.prisma.outboxEvent.count({ where: { eventType: "user.authentication.success", body: { contains: accountId } } })).toBe(1);
    expect((await h.db.prisma.otpState.findUniqueOrThrow({ where: { id: start.body.state_id } })).attempts).toBe(0);
  });

  it("twenty parallel wrong guesses get five tries, then even the right code is refused", async () => {
    const start = await h.call("POST", "/auth/otp/start", { body: { email: "race-guess@example.com" } });
    const otp = await h.mailbox.otp("race-guess@example.com");
    const wrong = Array.from({ length: 20 }, (_, i) => String((Number(otp) + 1 + i) % 1_000_000).padStart(6, "0"));
    const results = await Promise.all(wrong.map((code, i) => callers()[i % callers().length]("/auth/otp/verify", { state_id: start.body.state_id, otp: code })));
    expect(results.every((r) => r.status === 400 && r.body.error === "OTPInvalid")).toBe(true);
    expect((await h.db.prisma.otpState.findUniqueOrThrow({ where: { id: start.body.state_id } })).attempts).toBe(5);
    expect((await local("/auth/otp/verify", { state_id: start.body.state_id, otp })).status).toBe(400);
  });
});
