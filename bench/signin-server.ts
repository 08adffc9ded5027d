// One system under test of `npm run bench -- signin` (bench/signin.ts), in a process of its own:
//   linkgate:    the app (src/app.ts) on @hono/node-server, as `npm start` serves it, its limits
//                lifted (every flow comes from one loopback client) and its codes sent by its own
//                SMTP transport (nodemailer) to the benchmark's sink.
//   better-auth: Better Auth with its e-mail OTP plugin on a plain node:http server
//                (better-auth/node toNodeHandler), on the pg Pool (its Kysely adapter), its tables
//                made by its own migration (getMigrations), codes sent by nodemailer to the same sink.
// Started by fork() with an IPC channel: it sends { ready, port } once listening; it answers
// "stats" with the queries its pg clients sent so far (BEGIN and COMMIT included) and "stop" by
// exiting (a --cpu-prof profile is written then).
import { serve } from "@hono/node-server";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import nodemailer from "nodemailer";
import pg from "pg";

export type ServerArgs = { system: "linkgate" | "better-auth"; databaseUrl: string; smtpUrl: string; apiKey: string; secret: string };

let queries = 0;
const clientQuery = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  queries++;
  return (clientQuery as (...a: unknown[]) => unknown).apply(this, args);
} as typeof clientQuery;

/** Both on the pg Pool's default size (10), as each ships. */

async function linkgate(a: ServerArgs): Promise<{ port: number; close: () => Promise<void> }> {
  const { buildApp } = await import("../src/app.ts");
  const { loadConfig } = await import("../src/config.ts");
  const { createLogger } = await import("../src/log.ts");
  const dataDir = mkdtempSync(path.join(tmpdir(), "linkgate-bench-"));
  const config = loadConfig({
    DATABASE_URL: a.databaseUrl,
    LINKGATE_DATA_DIR: dataDir,
    LINKGATE_SECRET_KEY: a.secret,
    LINKGATE_BOOTSTRAP_API_KEY: a.apiKey,
    SMTP_URL: a.smtpUrl,
  });
  const big = { max: 1e9, windowSeconds: 3600 };
  // lifted: the benchmark measures throughput, and its returning users sign in from one known
  // place far more than the 10 codes an hour a known place gets (68275ae added that budget after
  // the last recorded run; the first run after it refused 4 to 88 of them)
  const limits = { sendsPerIdentifier: big, sendsPerAddress: big, sendsPerAccount: big, smsPerProject: big, emailsPerProject: big, failuresPerSubject: big, knownPlaceSendsPerIdentifier: big };
  const app = await buildApp(config, { logger: createLogger("silent"), limits });
  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise((r) => server.once("listening", r));
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      await new Promise((r) => server.close(r));
      await app.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function betterAuth(a: ServerArgs): Promise<{ port: number; close: () => Promise<void> }> {
  const { betterAuth } = await import("better-auth");
  const { emailOTP } = await import("better-auth/plugins/email-otp");
  const { toNodeHandler } = await import("better-auth/node");
  const { getMigrations } = await import("better-auth/db/migration");
  const pool = new pg.Pool({ connectionString: a.databaseUrl });
  const mailer = nodemailer.createTransport(a.smtpUrl);
  const server = http.createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  const options = {
    database: pool,
    secret: a.secret,
    baseURL: `http://127.0.0.1:${port}`,
    // its in-memory per-IP limiter would refuse one loopback client at these rates; linkgate's are lifted too
    rateLimit: { enabled: false },
    telemetry: { enabled: false },
    logger: { disabled: true },
    plugins: [
      emailOTP({
        async sendVerificationOTP({ email, otp }) {
          await mailer.sendMail({
            from: "bench <no-reply@localhost>",
            to: email,
            subject: "Your sign-in code",
            text: `Your code is ${otp}. It expires in 5 minutes. If you did not ask for it, ignore this message.`,
          });
        },
      }),
    ],
  };
  const { runMigrations } = await getMigrations(options);
  await runMigrations();
  const auth = betterAuth(options);
  server.on("request", toNodeHandler(auth));
  return {
    port,
    close: async () => {
      await new Promise((r) => server.close(r));
      await pool.end();
    },
  };
}

const args = JSON.parse(process.argv[2]) as ServerArgs;
const running = await (args.system === "linkgate" ? linkgate(args) : betterAuth(args));
process.on("message", async (m: string) => {
  if (m === "stats") process.send!({ queries });
  if (m === "stop") {
    await running.close();
    process.exit(0);
  }
});
process.send!({ ready: true, port: running.port });
