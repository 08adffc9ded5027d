// A whole linkgate on a test database with real OTP transports, driven through app.fetch.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import type { AddressInfo } from "node:net";
import path from "node:path";
import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { print } from "graphql";
import { buildApp, type App } from "../../src/app.ts";
import { loadConfig, type Config } from "../../src/config.ts";
import type { Limits } from "../../src/limits.ts";
import { createAppServer, type Deadlines } from "../../src/http/server.ts";
import { createLogger, type Logger } from "../../src/log.ts";
import { openTestDatabase, type Backend, type TestDatabase } from "./db.ts";
import { startMailbox, type Mailbox } from "./mailbox.ts";

export type Harness = {
  app: App;
  db: TestDatabase;
  mailbox: Mailbox;
  config: Config;
  /** the project's secret key, sent by call() and gql() unless a test says otherwise */
  apiKey: string;
  /** the project's publishable key, what a front-end app ships */
  publishableKey: string;
  projectId: string;
  adminToken: string;
  /** `from` is the client's socket address, as @hono/node-server would pass it */
  call(method: string, path: string, init?: { body?: unknown; headers?: Record<string, string>; raw?: string; from?: string }): Promise<{ status: number; body: any; headers: Headers }>;
  gql(query: string, variables?: Record<string, unknown>, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  /** a typed operation from test/generated/operations.ts; throws on top-level errors */
  op<R, V>(doc: TypedDocumentNode<R, V>, variables: V, headers?: Record<string, string>): Promise<R>;
  signIn(identifier: { email: string } | { phone: string }): Promise<{ token: string; accountId: string; idToken: string }>;
  close(): Promise<void>;
};

type HarnessOptions = { env?: Record<string, string>; limits?: Partial<Limits>; logger?: Logger };

export async function startHarness(backend: Backend, opts: HarnessOptions = {}): Promise<Harness> {
  const db = await openTestDatabase(backend);
  try {
    return await harnessOn(db, opts);
  } catch (err) {
    // the caller never gets a harness to close: drop the database it would have dropped
    await db.close().catch(() => {});
    throw err;
  }
}

/** A harness on a database the test opened itself (closed with the harness). */
export async function harnessOn(db: TestDatabase, opts: HarnessOptions = {}): Promise<Harness> {
  const mailbox = await startMailbox();
  const adminToken = randomBytes(24).toString("hex");
  const apiKey = `lg_sk_test_${randomBytes(24).toString("base64url")}`;
  const publishableKey = `lg_pk_test_${randomBytes(24).toString("base64url")}`;
  const dataDir = mkdtempSync(path.join(tmpdir(), "linkgate-test-"));
  const removeDataDir = () => rmSync(dataDir, { recursive: true, force: true });
  const config = loadConfig({
    LINKGATE_DATA_DIR: dataDir,
    LINKGATE_SECRET_KEY: randomBytes(32).toString("base64"),
    LINKGATE_BOOTSTRAP_API_KEY: apiKey,
    LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY: publishableKey,
    LINKGATE_ADMIN_TOKEN: adminToken,
    SMTP_URL: mailbox.smtpUrl,
    SMS_WEBHOOK_URL: mailbox.smsUrl,
    // the receivers here are on loopback; production refuses the setting (src/config.ts)
    ...(opts.env?.NODE_ENV === "production" ? {} : { LINKGATE_WEBHOOK_ALLOW_PRIVATE: "1" }),
    // Requests through app.fetch have no socket and all count as one client address; the
    // wide ceilings are lifted so suites that sign in many users test what they are about.
    // test/security.abuse-limits.test.ts sets them.
    LINKGATE_LIMIT_SENDS_PER_ADDRESS_HOURLY: "100000",
    LINKGATE_LIMIT_SMS_PER_PROJECT_HOURLY: "100000",
    LINKGATE_LIMIT_EMAILS_PER_PROJECT_HOURLY: "100000",
    ...opts.env,
  });
  const logger = opts.logger ?? createLogger(process.env.TEST_LOG_LEVEL ?? "silent");
  let app: App | undefined;
  let project: { id: string };
  try {
    app = await buildApp(config, { db, logger, limits: opts.limits });
    project = await db.prisma.project.findFirstOrThrow({ where: { name: "default" } });
  } catch (err) {
    await app?.close().catch(() => {});
    await mailbox.close().catch(() => {});
    removeDataDir();
    throw err;
  }

  const call: Harness["call"] = async (method, p, init = {}) => {
    const headers: Record<string, string> = { "x-api-key": apiKey, ...init.headers };
    let body: string | undefined = init.raw;
    if (init.body !== undefined) {
      body = JSON.stringify(init.body);
      headers["content-type"] ??= "application/json";
    }
    const env = init.from ? { incoming: { socket: { remoteAddress: init.from } } } : undefined;
    const res = await app.fetch(new Request(`http://linkgate.test${p}`, { method, headers, body }), env);
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {}
    return { status: res.status, body: parsed, headers: res.headers };
  };

  const gql: Harness["gql"] = async (query, variables, headers) => {
    const res = await call("POST", "/graphql", { body: { query, variables }, headers });
    return { status: res.status, body: res.body };
  };

  const op: Harness["op"] = async (doc, variables, headers) => {
    const res = await gql(print(doc), variables as Record<string, unknown>, headers);
    if (res.body.errors) throw new Error(`GraphQL errors: ${JSON.stringify(res.body.errors)}`);
    return res.body.data;
  };

  const signIn: Harness["signIn"] = async (identifier) => {
    const start = await call("POST", "/auth/otp/start", { body: identifier });
    if (start.status !== 200) throw new Error(`start failed: ${JSON.stringify(start.body)}`);
    const to = "email" in identifier ? identifier.email : identifier.phone;
    const otp = await mailbox.otp(to);
    const verify = await call("POST", "/auth/otp/verify", { body: { state_id: start.body.state_id, otp } });
    if (verify.status !== 200) throw new Error(`verify failed: ${JSON.stringify(verify.body)}`);
    return { token: verify.body.access_token, accountId: verify.body.account_id, idToken: verify.body.id_token };
  };

  return {
    app,
    db,
    mailbox,
    config,
    apiKey,
    publishableKey,
    projectId: project.id,
    adminToken,
    call,
    gql,
    op,
    signIn,
    async close() {
      await app.close();
      await mailbox.close();
      await db.close();
      removeDataDir();
    },
  };
}

export type Socket = { port: number; origin: string; close(): Promise<void> };

/**
 * The harness's app on a real socket on 127.0.0.1, served as src/main.ts serves it
 * (createAppServer): for what only the server does (socket addresses, how a body is framed, the
 * headers it writes, the requests it answers before the app). `call` goes around it, straight to
 * the app. `logger` hears the server's own answers; `deadlines` shortens a request's.
 */
export async function onSocket(h: Harness, opts: { logger?: Logger; deadlines?: Deadlines } = {}): Promise<Socket> {
  const server = createAppServer((req, env) => h.app.fetch(req, env), { hostname: "127.0.0.1", logger: opts.logger ?? createLogger("silent"), deadlines: opts.deadlines });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
