// A database outage answers honestly: 503 ServiceUnavailable with Retry-After on REST, a
// top-level SERVICE_UNAVAILABLE (HTTP 503) on GraphQL, /readyz 503, each at once rather than
// after a long timeout; once the database is back, everything answers 200 again without a
// restart. The outage is a TCP proxy between the app and the shared Postgres server that the
// test closes and reopens; the server itself is never stopped.
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { createGraphQLError } from "graphql-yoga";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp, type App } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { openDatabase, type Database } from "../src/db/client.ts";
import { isConnectionFailure } from "../src/db/faults.ts";
import { InvalidRequest } from "../src/errors.ts";
import { createLogger } from "../src/log.ts";
import { adminQuery, backends, openTestDatabase, serverUrl, withDatabase, type TestDatabase } from "./support/db.ts";
import { startMailbox, type Mailbox } from "./support/mailbox.ts";

/**
 * Forwards loopback connections to a target; close() is the outage, open() the recovery.
 * open({ forward: false }) accepts connections and never answers: a partitioned or hung host.
 */
class TcpProxy {
  private server?: net.Server;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  async open({ forward = true } = {}): Promise<void> {
    const server = net.createServer((client) => (forward ? this.forward(client) : this.hold(client)));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.port, "127.0.0.1", () => resolve());
    });
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
  }

  /** Stops listening (new connections are refused) and cuts every open connection. */
  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  private hold(client: net.Socket) {
    this.sockets.add(client);
    client.on("error", () => {});
    client.on("close", () => this.sockets.delete(client));
  }

  private forward(client: net.Socket) {
    const upstream = net.connect(this.target.port, this.target.host);
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => {
        this.sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  }
}

/** Fails the test with a clear message instead of hanging until the test timeout. */
async function answersWithin<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms during the outage`)), ms);
  });
  try {
    return await Promise.race([p, hang]);
  } finally {
    clearTimeout(timer);
  }
}

const postgres = backends.includes("postgres");

describe.runIf(postgres)("database outage on postgres", () => {
  let direct: TestDatabase;
  let proxied: Database;
  let proxy: TcpProxy;
  let mailbox: Mailbox;
  let app: App;
  let token: string;
  const apiKey = `lg_sk_test_${randomBytes(24).toString("base64url")}`;

  beforeAll(async () => {
    direct = await openTestDatabase("postgres");
    const url = new URL(direct.url!);
    proxy = new TcpProxy({ host: url.hostname, port: Number(url.port || 5432) });
    await proxy.open();
    url.host = `127.0.0.1:${proxy.port}`;
    proxied = await openDatabase({ databaseUrl: url.toString(), dataDir: "" });
    mailbox = await startMailbox();
    const config = loadConfig({
      LINKGATE_DATA_DIR: mkdtempSync(path.join(tmpdir(), "linkgate-outage-")),
      LINKGATE_SECRET_KEY: randomBytes(32).toString("base64"),
      LINKGATE_BOOTSTRAP_API_KEY: apiKey,
      LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY: `lg_pk_test_${randomBytes(24).toString("base64url")}`,
      SMTP_URL: mailbox.smtpUrl,
      SMS_WEBHOOK_URL: mailbox.smsUrl,
    });
    app = await buildApp(config, { db: proxied, logger: createLogger(process.env.TEST_LOG_LEVEL ?? "silent") });
    token = await signIn("outage@example.com");
  });
  afterAll(async () => {
    await app?.close();
    await proxied?.close();
    await proxy?.close();
    await mailbox?.close();
    await direct?.close();
  });

  async function call(method: string, p: string, body?: unknown, headers: Record<string, string> = {}) {
    const init: RequestInit = { method, headers: { "x-api-key": apiKey, ...headers } };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      (init.headers as Record<string, string>)["content-type"] = "application/json";
    }
    const res = await app.fetch(new Request(`http://linkgate.test${p}`, init));
    return { status: res.status, headers: res.headers, body: (await res.json()) as any };
  }

  async function signIn(email: string) {
    const start = await call("POST", "/auth/otp/start", { email });
    expect(start.status, JSON.stringify(start.body)).toBe(200);
    const verify = await call("POST", "/auth/otp/verify", { state_id: start.body.state_id, otp: await mailbox.otp(email) });
    expect(verify.status, JSON.stringify(verify.body)).toBe(200);
    return verify.body.access_token as string;
  }

  const gql = (query: string, headers: Record<string, string> = {}) => call("POST", "/graphql", { query }, headers);
  const user = () => ({ authorization: `Bearer ${token}` });

  it("answers 503 with Retry-After at once while the database is unreachable, and 200 again once it is back", async () => {
    expect((await call("GET", "/readyz")).status).toBe(200);
    await proxy.close();

    const ready = await answersWithin(10_000, "/readyz", call("GET", "/readyz"));
    expect(ready.status).toBe(503);
    expect(ready.headers.get("retry-after")).toMatch(/^\d+$/);

    for (const [route, body, headers] of [
      ["/auth/otp/start", { email: "someone@example.com" }, {}],
      ["/auth/otp/verify", { state_id: "otp_x", otp: "123456" }, {}],
      ["/users/link/request", { email: "other@example.com" }, user()],
      ["/users/link/unmerge", {}, user()],
      ["/api/v1/webhooks/rotate-secret", { webhook_id: "wh_x" }, { authorization: `Bearer ${apiKey}` }],
    ] as const) {
      const r = await answersWithin(10_000, route, call("POST", route, body, headers));
      expect(r.status, `${route}: ${JSON.stringify(r.body)}`).toBe(503);
      expect(r.headers.get("retry-after"), route).toMatch(/^\d+$/);
      expect(r.body).toEqual({ error: "ServiceUnavailable", message: expect.any(String) });
    }
    const info = await answersWithin(10_000, "userinfo", call("GET", "/oauth/userinfo", undefined, user()));
    expect(info.status).toBe(503);

    for (const [query, headers] of [
      [`mutation { startSignIn(email: "someone@example.com") { __typename } }`, {}],
      [`{ webhook(id: "wh_x") { id } }`, {}],
      [`{ viewer { id identifiers { value } } }`, user()],
    ] as const) {
      const r = await answersWithin(10_000, query, gql(query, headers));
      expect(r.status, `${query}: ${JSON.stringify(r.body)}`).toBe(503);
      expect(r.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(r.body.errors).toHaveLength(1);
      expect(r.body.errors[0]).toMatchObject({ message: expect.any(String), extensions: { code: "SERVICE_UNAVAILABLE" } });
      expect(r.body.errors[0].extensions).not.toHaveProperty("http");
    }

    await proxy.open();
    expect((await call("GET", "/readyz")).status).toBe(200);
    expect((await gql(`{ viewer { identifiers { value } } }`, user())).body.data.viewer.identifiers).toEqual([{ value: "outage@example.com" }]);
    expect((await call("POST", "/users/link/request", { email: "other@example.com" }, user())).status).toBe(200);
    expect(await signIn("after-outage@example.com")).toMatch(/^ey/);
  });

  it("connections cut in the middle of use are 503 too, and the pool heals", async () => {
    // Every pooled connection is open and idle; cutting them (without refusing new ones)
    // is a server restart as the app sees it.
    await Promise.all(Array.from({ length: 5 }, () => call("GET", "/readyz")));
    await proxy.close();
    await proxy.open();
    for (let i = 0; i < 3; i++) {
      const r = await answersWithin(10_000, "sign-in start", call("POST", "/auth/otp/start", { email: `cut-${i}@example.com` }));
      expect([200, 503], JSON.stringify(r.body)).toContain(r.status);
      if (r.status === 503) expect(r.body.error).toBe("ServiceUnavailable");
    }
    expect((await call("POST", "/auth/otp/start", { email: "healed@example.com" })).status).toBe(200);
  });

  // Needs the pool to give up connecting after a bound (pg waits forever by default): the
  // change to src/db/client.ts (connectionTimeoutMillis, 5 s) is proposed, not yet made.
  // Enable this test with it.
  it("a database that accepts connections but never answers is 503 within the connect timeout, not a hang", async () => {
    await proxy.close();
    await proxy.open({ forward: false });
    try {
      const [ready, start, graphql] = await answersWithin(
        15_000,
        "a request to a silent database",
        Promise.all([
          call("GET", "/readyz"),
          call("POST", "/auth/otp/start", { email: "silent@example.com" }),
          gql(`{ webhook(id: "wh_x") { id } }`),
        ]),
      );
      expect(ready.status).toBe(503);
      expect(start.status, JSON.stringify(start.body)).toBe(503);
      expect(start.body.error).toBe("ServiceUnavailable");
      expect(graphql.status).toBe(503);
      expect(graphql.body.errors[0].extensions.code).toBe("SERVICE_UNAVAILABLE");
    } finally {
      await proxy.close();
      await proxy.open();
    }
    expect((await call("POST", "/auth/otp/start", { email: "spoke-again@example.com" })).status).toBe(200);
  });
});

/** The error a promise rejects with; fails the test if it resolves. */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("expected a rejection");
}

describe("isConnectionFailure, on the errors the drivers really raise", () => {
  it("a refused connection, and the same error wrapped as GraphQL wraps it", async () => {
    const closed = new TcpProxy({ host: "127.0.0.1", port: 1 });
    await closed.open();
    const port = closed.port;
    await closed.close(); // a port nobody listens on any more
    const err = await rejection(new pg.Client({ host: "127.0.0.1", port, user: "x", database: "x" }).connect());
    expect(isConnectionFailure(err)).toBe(true);
    expect(isConnectionFailure(createGraphQLError("boom", { originalError: err as Error }))).toBe(true);
  });

  it("a pool that cannot get a connection in time", async () => {
    const silent = new TcpProxy({ host: "127.0.0.1", port: 1 });
    await silent.open({ forward: false });
    const pool = new pg.Pool({ host: "127.0.0.1", port: silent.port, user: "x", database: "x", connectionTimeoutMillis: 200 });
    try {
      expect(isConnectionFailure(await rejection(pool.query("SELECT 1")))).toBe(true);
    } finally {
      await pool.end();
      await silent.close();
    }
  });

  it.runIf(postgres)("a database closed to connections for maintenance (55000), through pg and Prisma", async () => {
    const name = `lg_closed_${randomBytes(4).toString("hex")}`;
    const url = withDatabase(serverUrl!, name);
    await adminQuery(`CREATE DATABASE ${name}`);
    await adminQuery(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
    try {
      const err = await rejection(new pg.Client({ connectionString: url }).connect());
      expect((err as { code?: string }).code).toBe("55000");
      expect(isConnectionFailure(err)).toBe(true);
      const prisma = await openDatabase({ databaseUrl: url, dataDir: "" });
      try {
        expect(isConnectionFailure(await rejection(prisma.prisma.$queryRaw`SELECT 1`))).toBe(true);
      } finally {
        await prisma.close();
      }
    } finally {
      await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    }
  });

  it.runIf(postgres)("a connection the server refuses is an outage by its code, not its words: closed (55000), dropped (3D000), through the pool and Prisma", async () => {
    const closed = `lg_closed_${randomBytes(4).toString("hex")}`;
    await adminQuery(`CREATE DATABASE ${closed}`);
    await adminQuery(`ALTER DATABASE ${closed} ALLOW_CONNECTIONS false`);
    try {
      for (const [name, sqlstate] of [[closed, "55000"], [`lg_never_${randomBytes(4).toString("hex")}`, "3D000"]] as const) {
        const db = await openDatabase({ databaseUrl: withDatabase(serverUrl!, name), dataDir: "" });
        try {
          // the pool the per-delivery statements use, then Prisma over the same pool
          const err = (await rejection(db.driver.kind === "postgres" ? db.driver.pool.query("SELECT 1") : Promise.reject(new Error("not postgres")))) as { code?: string; refusedAs?: string; message?: string };
          expect({ code: err.code, refusedAs: err.refusedAs }, err.message).toEqual({ code: "08004", refusedAs: sqlstate });
          expect(isConnectionFailure(err)).toBe(true);
          expect(isConnectionFailure(await rejection(db.prisma.$queryRaw`SELECT 1`))).toBe(true);
        } finally {
          await db.close();
        }
      }
    } finally {
      await adminQuery(`DROP DATABASE IF EXISTS ${closed} WITH (FORCE)`);
    }
  });

  it.runIf(postgres)("a write refused by a standby after a failover (25006), a lock or a statement its operator timed out (55P03, 57014), through Prisma", async () => {
    const db = await openTestDatabase("postgres");
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      const refused = await rejection(
        db.prisma.$transaction(async (tx) => {
          await tx.$executeRawUnsafe("SET TRANSACTION READ ONLY");
          await tx.$executeRawUnsafe("CREATE TABLE lg_outage_probe (v int)");
        }),
      );
      const timedOut = await rejection(
        db.prisma.$transaction(async (tx) => {
          await tx.$executeRawUnsafe("SET LOCAL statement_timeout = '20ms'");
          await tx.$queryRawUnsafe("SELECT pg_sleep(5)");
        }),
      );
      await holder.query("BEGIN; SELECT pg_advisory_xact_lock(4242)");
      const lockWait = await rejection(
        db.prisma.$transaction(async (tx) => {
          await tx.$executeRawUnsafe("SET LOCAL lock_timeout = '20ms'");
          await tx.$queryRawUnsafe("SELECT pg_advisory_xact_lock(4242)");
        }),
      );
      await holder.query("ROLLBACK");
      for (const err of [refused, timedOut, lockWait]) expect(isConnectionFailure(err)).toBe(true);
      // and what is a bug stays one
      expect(isConnectionFailure(await rejection(db.prisma.$queryRawUnsafe("SELECT 1/0")))).toBe(false);
    } finally {
      await holder.end();
      await db.close();
    }
  });

  it.runIf(postgres)("a backend terminated by the server (57P01) through Prisma", async () => {
    const db = await openTestDatabase("postgres");
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    try {
      // rejection() awaits at once: a Prisma query only starts when awaited.
      const sleeping = rejection(db.prisma.$queryRaw`SELECT pg_sleep(30), 'lg-outage-victim' AS tag`);
      const victim = async () =>
        (await admin.query(`SELECT pid FROM pg_stat_activity WHERE query LIKE '%lg-outage-victim%' AND pid <> pg_backend_pid()`)).rows[0]?.pid;
      let pid: number | undefined;
      while (!(pid = await victim())) await new Promise((r) => setImmediate(r));
      await admin.query("SELECT pg_terminate_backend($1)", [pid]);
      expect(isConnectionFailure(await sleeping)).toBe(true);
    } finally {
      await admin.end();
      await db.close();
    }
  });
});

describe.each(backends)("isConnectionFailure on %s", (backend) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await openTestDatabase(backend);
  });
  afterAll(() => db?.close());

  it("input the database refuses (22021) and domain errors are not outages", async () => {
    const err = await rejection(db.prisma.$queryRaw`SELECT ${"a\u0000b"}::text`);
    expect(isConnectionFailure(err)).toBe(false);
    expect(isConnectionFailure(new InvalidRequest())).toBe(false);
    expect(isConnectionFailure(new Error("something else"))).toBe(false);
  });
});
