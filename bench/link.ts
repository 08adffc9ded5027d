// `npm run bench -- link`: full link flows (REST request + verify) per second and their
// latency, against the ceiling of trivial GraphQL requests ({ __typename }) on the same server,
// on PGlite and (when a server is reachable) Postgres.
import { serve } from "@hono/node-server";
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { Pool } from "undici";
import { buildApp } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { createLogger } from "../src/log.ts";
import type { Messenger } from "../src/messaging/transport.ts";
import { openTestDatabase, type Backend } from "../test/support/db.ts";
import { closedLoop, openLoop, type RunResult } from "./load.ts";

const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);

/** Codes are captured in process: the benchmark measures linkgate, not a mail server. */
function captureMessenger(): Messenger & { codes: Map<string, string> } {
  const codes = new Map<string, string>();
  return { codes, send: async (m) => void (m.code && codes.set(m.to.value, m.code)), close() {} };
}

export async function benchLink(backends: Backend[]) {
  const rows: Array<Record<string, string>> = [];
  for (const backend of backends) {
    const db = await openTestDatabase(backend, { poolSize: 20 });
    const messenger = captureMessenger();
    const apiKey = `lg_bench_${randomBytes(16).toString("hex")}`;
    const config = loadConfig({
      LINKGATE_DATA_DIR: mkdtempSync(path.join(tmpdir(), "linkgate-bench-")),
      LINKGATE_SECRET_KEY: randomBytes(32).toString("base64"),
      LINKGATE_BOOTSTRAP_API_KEY: apiKey,
    });
    const big = { max: 1e9, windowSeconds: 3600 };
        // every flow comes from this one loopback client: lift every limit, the benchmark measures the work
    const limits = { sendsPerIdentifier: big, sendsPerAddress: big, sendsPerAccount: big, smsPerProject: big, emailsPerProject: big, failuresPerSubject: big };
    const app = await buildApp(config, { db, messenger, logger: createLogger("silent"), limits });
    const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
    await new Promise((r) => server.once("listening", r));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const pool = new Pool(origin, { connections: CONCURRENCY * 2, pipelining: 1 });

    const post = async (p: string, body: unknown, headers: Record<string, string> = {}) => {
      const res = await pool.request({ path: p, method: "POST", headers: { "content-type": "application/json", "x-api-key": apiKey, ...headers }, body: JSON.stringify(body) });
      const json = (await res.body.json()) as Record<string, any>;
      if (res.statusCode !== 200) throw new Error(`${p}: ${res.statusCode} ${JSON.stringify(json)}`);
      return json;
    };
    const signIn = async (email: string) => {
      const { state_id } = await post("/auth/otp/start", { email });
      const tokens = await post("/auth/otp/verify", { state_id, otp: messenger.codes.get(email) });
      return tokens.access_token as string;
    };

    const trivial = await closedLoop(CONCURRENCY, SECONDS, async () => void (await post("/graphql", { query: "{ __typename }" })));
    const tokens = await Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => signIn(`bench-${i}@example.com`)));
    let n = 0;
    const flow = async (w: number) => {
      const email = `linked-${w}-${n++}-${randomBytes(3).toString("hex")}@example.com`;
      const auth = { authorization: `Bearer ${tokens[w % tokens.length]}` };
      const { state_id } = await post("/users/link/request", { email }, auth);
      const r = await post("/users/link/verify", { state_id, otp: messenger.codes.get(email) }, auth);
      if (r.outcome !== "attached") throw new Error(JSON.stringify(r));
    };
    const flows = await closedLoop(CONCURRENCY, SECONDS, flow);
    const half = await openLoop(flows.rps / 2, SECONDS, (i) => flow(i % CONCURRENCY));

    await pool.close();
    await new Promise((r) => server.close(r));
    await app.close();
    await db.close();
    const fmt = (r: RunResult) => `${r.rps.toFixed(0)}/s (p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms, ${r.errors} errors)`;
    rows.push({
      backend,
      "trivial { __typename }": fmt(trivial),
      "link flows, closed loop": fmt(flows),
      "ratio (goal ≥ 0.125)": (flows.rps / trivial.rps).toFixed(3),
      [`link flows at half rate (goal p99 ≤ 50 ms)`]: `${half.rps.toFixed(0)}/s p50 ${half.p50.toFixed(1)} ms p99 ${half.p99.toFixed(1)} ms (${half.errors} errors)`,
    });
  }
  return rows;
}
