// The load generator of `npm run bench -- signin` (bench/signin.ts), in a process of its own,
// and the SMTP sink both systems send their codes to (smtp-server on loopback): a flow waits
// for its code to arrive by mail, as a user would. Driven over IPC by the parent:
//   { cmd: "init" }                         -> { smtpUrl }
//   { cmd: "seed", target, emails }         -> {}   (signs each in once: the returning users' pool)
//   { cmd: "run", target, scenario, … }     -> RunResult (closed loop, CONCURRENCY users)
//   { cmd: "prepare", target, scenario }    -> {}   (one user ready for "flows")
//   { cmd: "flows", n }                     -> {}   (n flows one after another: statements per flow)
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { Pool } from "undici";
import { closedLoop } from "./load.ts";

export type Target = { system: "linkgate" | "better-auth"; origin: string; apiKey: string };
export type Scenario = "new" | "returning" | "trivial";

const waiting = new Map<string, (code: string) => void>();
const arrived = new Map<string, string>();

/** The code mailed to `email`, once it arrives (each code is read once). */
function codeFor(email: string): Promise<string> {
  const code = arrived.get(email);
  if (code) {
    arrived.delete(email);
    return Promise.resolve(code);
  }
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      waiting.delete(email);
      reject(new Error(`no code for ${email}`));
    }, 10_000);
    waiting.set(email, (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
}

function received(to: string, raw: string) {
  const code = /Your code is (\d{6})/.exec(raw)?.[1];
  if (!code) return;
  const w = waiting.get(to);
  if (w) {
    waiting.delete(to);
    w(code);
  } else arrived.set(to, code);
}

async function startSink(): Promise<string> {
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8");
        for (const r of session.envelope.rcptTo) received(r.address.toLowerCase(), raw);
        callback();
      });
    },
  });
  await new Promise<void>((r) => smtp.listen(0, "127.0.0.1", r));
  return `smtp://127.0.0.1:${(smtp.server.address() as AddressInfo).port}`;
}

const pools = new Map<string, Pool>();
const poolFor = (origin: string) => pools.get(origin) ?? pools.set(origin, new Pool(origin, { connections: 64, pipelining: 1 })).get(origin)!;

async function request(t: Target, method: "GET" | "POST", path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await poolFor(t.origin).request({
    path,
    method,
    headers: { ...(body ? { "content-type": "application/json" } : {}), ...headers },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`${path}: ${res.statusCode} ${text.slice(0, 200)}`);
  return { json: JSON.parse(text) as Record<string, any>, headers: res.headers };
}

/** One whole sign-in: ask for a code, read it from the mail, send it back. Returns what a trivial request authenticates with. */
async function signIn(t: Target, email: string): Promise<Record<string, string>> {
  if (t.system === "linkgate") {
    const key = { "x-api-key": t.apiKey };
    const { json: started } = await request(t, "POST", "/auth/otp/start", { email }, key);
    const { json: tokens } = await request(t, "POST", "/auth/otp/verify", { state_id: started.state_id, otp: await codeFor(email) }, key);
    if (!tokens.access_token) throw new Error("no token");
    return { authorization: `Bearer ${tokens.access_token}` };
  }
  await request(t, "POST", "/api/auth/email-otp/send-verification-otp", { email, type: "sign-in" });
  const { json, headers } = await request(t, "POST", "/api/auth/sign-in/email-otp", { email, otp: await codeFor(email) });
  if (!json.token) throw new Error("no token");
  const cookies = ([] as string[]).concat(headers["set-cookie"] ?? []).map((c) => c.split(";")[0]);
  return { cookie: cookies.join("; ") };
}

async function trivial(t: Target, auth: Record<string, string>) {
  if (t.system === "linkgate") {
    const { json } = await request(t, "GET", "/oauth/userinfo", undefined, auth);
    if (!json.sub) throw new Error("no user");
  } else {
    const { json } = await request(t, "GET", "/api/auth/get-session", undefined, auth);
    if (!json?.user) throw new Error("no session");
  }
}

let fresh = 0;
const newEmail = (t: Target) => `new-${t.system}-${process.pid}-${fresh++}@example.com`;

/**
 * What each user of a scenario does once. Returning users take turns over the pool, each user
 * within its own slice of it, so no two sign in as one address at once (two codes in flight for
 * one address would cross).
 */
async function flowOf(t: Target, scenario: Scenario, pool: string[], concurrency: number): Promise<(w: number) => Promise<void>> {
  if (scenario === "new") return async () => void (await signIn(t, newEmail(t)));
  if (scenario === "returning") {
    return async (w) => {
      const slice = Math.floor(pool.length / concurrency);
      await signIn(t, pool[w * slice + Math.floor(Math.random() * slice)]);
    };
  }
  const auths = await Promise.all(Array.from({ length: concurrency }, () => signIn(t, newEmail(t))));
  return (w) => trivial(t, auths[w]);
}

type Message =
  | { cmd: "init" }
  | { cmd: "seed"; target: Target; emails: string[]; concurrency: number }
  | { cmd: "run"; target: Target; scenario: Scenario; pool: string[]; concurrency: number; seconds: number }
  | { cmd: "prepare"; target: Target; scenario: Scenario; pool: string[] }
  | { cmd: "flows"; n: number };

let prepared: ((w: number) => Promise<void>) | undefined;

process.on("message", async (m: Message) => {
  try {
    if (m.cmd === "init") return process.send!({ smtpUrl: await startSink() });
    if (m.cmd === "seed") {
      let next = 0;
      await Promise.all(
        Array.from({ length: m.concurrency }, async () => {
          while (next < m.emails.length) await signIn(m.target, m.emails[next++]);
        }),
      );
      return process.send!({});
    }
    if (m.cmd === "run") {
      const op = await flowOf(m.target, m.scenario, m.pool, m.concurrency);
      let firstError: string | undefined;
      const result = await closedLoop(m.concurrency, m.seconds, (w) =>
        op(w).catch((err) => {
          firstError ??= String(err);
          throw err;
        }),
      );
      return process.send!({ ...result, firstError });
    }
    if (m.cmd === "prepare") {
      prepared = await flowOf(m.target, m.scenario, m.pool, 1);
      return process.send!({});
    }
    for (let i = 0; i < m.n; i++) await prepared!(0);
    return process.send!({});
  } catch (err) {
    process.send!({ error: String(err) });
  }
});
process.send!({ ready: true });
