// `npm run bench -- signin`: linkgate's OTP sign-in against Better Auth's e-mail OTP sign-in
// (issue 26), side by side on one Postgres server (a database each), Postgres only.
//
// Three kinds of process, so no system shares its event loop with another or with the load:
// linkgate's server and Better Auth's server (bench/signin-server.ts), and the load generator
// with the SMTP sink both send their codes to (bench/signin-load.ts). A flow is the whole
// sign-in a user makes: ask for a code, read it from the mail, send it back
// (linkgate /auth/otp/start + /auth/otp/verify; Better Auth /email-otp/send-verification-otp +
// /sign-in/email-otp).
//
// Scenarios, each a closed loop of CONCURRENCY users for SECONDS, ROUNDS runs alternating
// between the systems (who goes first alternates too):
// * new: a new e-mail each flow (an account is created each time);
// * returning: users of a pool of POOL accounts, signed in once before the runs;
// * trivial: one authenticated request (linkgate GET /oauth/userinfo with the access token,
//   Better Auth GET /get-session with its session cookie).
// Figures: flows/s (median of the runs, and every run), server CPU per flow (the server's
// process, from /proc) and Postgres CPU per flow (the backends of that system's database), and
// statements per flow: queries sent by the server's pg clients (BEGIN and COMMIT included) over
// flows made one after another. Both databases are analyzed as they grow, as
// autovacuum would in production (bench/autovacuum.ts; this server runs without it).
//
// BENCH_SECONDS (default 30), BENCH_ROUNDS (3), BENCH_SIGNIN_POOL (2000),
// BENCH_SIGNIN_SCENARIOS (new,returning,trivial), BENCH_SIGNIN_SYSTEMS (linkgate,better-auth);
// BENCH_SIGNIN_PROFILE=<dir> runs linkgate's server under --cpu-prof (read it with bench/cpu-profile.ts).
import { fork, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import os from "node:os";
import pg from "pg";
import { fileURLToPath } from "node:url";
import type { ServerArgs } from "./signin-server.ts";
import type { Scenario, Target } from "./signin-load.ts";
import { analyzeLikeAutovacuum } from "./autovacuum.ts";
import type { RunResult } from "./load.ts";

const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 30);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const POOL = Number(process.env.BENCH_SIGNIN_POOL ?? 2000);
const SEQUENTIAL_FLOWS = 50;
const SCENARIOS = (process.env.BENCH_SIGNIN_SCENARIOS ?? "new,returning,trivial").split(",") as Scenario[];
const SYSTEMS = (process.env.BENCH_SIGNIN_SYSTEMS ?? "linkgate,better-auth").split(",") as Array<Target["system"]>;
const GOAL = 1.2;
const TITLES: Record<Scenario, string> = {
  new: "new user each flow",
  returning: `returning users (pool of ${POOL.toLocaleString("en")})`,
  trivial: "trivial authenticated request (userinfo / get-session)",
};

/** A child that speaks by IPC: each call waits for its one answer. */
class Child {
  private queue: Array<{ resolve: (m: any) => void; reject: (e: Error) => void }> = [];
  constructor(readonly proc: ChildProcess) {
    proc.on("message", (m: any) => {
      const waiter = this.queue.shift();
      if (m?.error) waiter?.reject(new Error(m.error));
      else waiter?.resolve(m);
    });
    proc.on("exit", (code) => {
      for (const w of this.queue.splice(0)) w.reject(new Error(`child exited (${code})`));
    });
  }
  static async start(file: string, args: string[], execArgv: string[]): Promise<[Child, any]> {
    const proc = fork(fileURLToPath(new URL(file, import.meta.url)), args, { execArgv: ["--import", "tsx", ...execArgv] });
    const c = new Child(proc);
    const first = await c.next();
    return [c, first];
  }
  private next(): Promise<any> {
    return new Promise((resolve, reject) => this.queue.push({ resolve, reject }));
  }
  async call(m: unknown): Promise<any> {
    const answer = this.next();
    this.proc.send(m as object);
    return answer;
  }
  async stop() {
    const exited = new Promise((r) => this.proc.once("exit", r));
    this.proc.send("stop");
    await exited;
  }
}

function procCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / 100;
}

/** CPU seconds used so far by the backends connected to `database`. */
async function databaseCpu(admin: pg.Client, database: string): Promise<Map<number, number>> {
  const { rows } = await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = $1`, [database]);
  const out = new Map<number, number>();
  for (const { pid } of rows) {
    try {
      out.set(pid, procCpuSeconds(pid));
    } catch {
      // ended
    }
  }
  return out;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const load = () => os.loadavg().map((x) => x.toFixed(1)).join(" ");

type System = { target: Target; server: Child; pid: number; database: string; pool: string[] };
type Run = RunResult & { serverUs: number; dbUs: number; firstError?: string };

export async function main() {
  const serverUrl = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  const tag = randomBytes(4).toString("hex");
  const databases: string[] = [];
  const systems: System[] = [];
  /** Both systems' databases are analyzed as they grow, as autovacuum would (bench/autovacuum.ts). */
  const analyzers: Array<{ stop(): Promise<void> }> = [];
  const [loadGen] = await Child.start("./signin-load.ts", [], []);
  console.log(`\n## sign-in: linkgate vs Better Auth (Postgres; ${CONCURRENCY} users, ${SECONDS} s × ${ROUNDS} runs alternating; load average ${load()} at the start)\n`);
  try {
    const { smtpUrl } = await loadGen.call({ cmd: "init" });
    for (const system of SYSTEMS) {
      const database = `${system === "linkgate" ? "lg" : "ba"}_bench_signin_${tag}`;
      await admin.query(`CREATE DATABASE ${database}`);
      databases.push(database);
      const url = new URL(serverUrl);
      url.pathname = `/${database}`;
      analyzers.push(await analyzeLikeAutovacuum(url.toString()));
      const args: ServerArgs = { system, databaseUrl: url.toString(), smtpUrl, apiKey: `lg_bench_${randomBytes(16).toString("hex")}`, secret: randomBytes(32).toString("base64") };
      const profile = system === "linkgate" && process.env.BENCH_SIGNIN_PROFILE ? ["--cpu-prof", "--cpu-prof-dir", process.env.BENCH_SIGNIN_PROFILE] : [];
      const [server, ready] = await Child.start("./signin-server.ts", [JSON.stringify(args)], profile);
      const target: Target = { system, origin: `http://127.0.0.1:${ready.port}`, apiKey: args.apiKey };
      const pool = Array.from({ length: POOL }, (_, i) => `user-${i}-${tag}@example.com`);
      if (SCENARIOS.includes("returning")) await loadGen.call({ cmd: "seed", target, emails: pool, concurrency: CONCURRENCY });
      systems.push({ target, server, pid: server.proc.pid!, database, pool });
    }
    // warm-up: JIT and every pooled connection's prepared statements
    for (const s of systems) for (const scenario of SCENARIOS) await runOnce(admin, loadGen, s, scenario, 2);

    const runs = new Map<string, Run[]>();
    for (let round = 0; round < ROUNDS; round++) {
      for (const scenario of SCENARIOS) {
        const order = round % 2 === 0 ? systems : [...systems].reverse();
        for (const s of order) {
          const r = await runOnce(admin, loadGen, s, scenario, SECONDS);
          const key = `${s.target.system}:${scenario}`;
          runs.set(key, [...(runs.get(key) ?? []), r]);
          console.log(`  ${scenario.padEnd(9)} ${s.target.system.padEnd(11)} ${r.rps.toFixed(1)}/s p50 ${r.p50.toFixed(1)} ms p99 ${r.p99.toFixed(1)} ms, ${r.errors} errors${r.firstError ? ` (${r.firstError})` : ""}; load ${load()}`);
        }
      }
    }

    const statements = new Map<string, number>();
    for (const s of systems) {
      for (const scenario of SCENARIOS) {
        await loadGen.call({ cmd: "prepare", target: s.target, scenario, pool: s.pool });
        await loadGen.call({ cmd: "flows", n: 10 });
        const { queries: q0 } = await s.server.call("stats");
        await loadGen.call({ cmd: "flows", n: SEQUENTIAL_FLOWS });
        const { queries: q1 } = await s.server.call("stats");
        statements.set(`${s.target.system}:${scenario}`, (q1 - q0) / SEQUENTIAL_FLOWS);
      }
    }
    report(runs, statements);
    console.log(`load average ${load()} at the end`);
  } finally {
    for (const a of analyzers) await a.stop();
    for (const s of systems) await s.server.stop();
    loadGen.proc.kill();
    for (const d of databases) await admin.query(`DROP DATABASE IF EXISTS ${d} WITH (FORCE)`);
    await admin.end();
  }
}

async function runOnce(admin: pg.Client, loadGen: Child, s: System, scenario: Scenario, seconds: number): Promise<Run> {
  const db0 = await databaseCpu(admin, s.database);
  const c0 = procCpuSeconds(s.pid);
  const r = (await loadGen.call({ cmd: "run", target: s.target, scenario, pool: s.pool, concurrency: CONCURRENCY, seconds })) as RunResult & { firstError?: string };
  const c1 = procCpuSeconds(s.pid);
  const db1 = await databaseCpu(admin, s.database);
  let db = 0;
  for (const [pid, t] of db1) db += t - (db0.get(pid) ?? 0);
  return { ...r, serverUs: ((c1 - c0) * 1e6) / Math.max(1, r.count), dbUs: (db * 1e6) / Math.max(1, r.count) };
}

function report(runs: Map<string, Run[]>, statements: Map<string, number>) {
  const rows: Record<string, Record<string, string>> = {};
  const goals: string[] = [];
  for (const scenario of SCENARIOS) {
    const row: Record<string, string> = {};
    const med: Record<string, number> = {};
    for (const system of SYSTEMS) {
      const rs = runs.get(`${system}:${scenario}`) ?? [];
      med[system] = median(rs.map((r) => r.rps));
      const cpu = (f: (r: Run) => number) => Math.round(median(rs.map(f)));
      const errors = rs.reduce((n, r) => n + r.errors, 0);
      row[system] =
        `${med[system].toFixed(1)}/s (${rs.map((r) => r.rps.toFixed(1)).join(", ")}); server ${cpu((r) => r.serverUs)} µs + db ${cpu((r) => r.dbUs)} µs CPU; ` +
        `${statements.get(`${system}:${scenario}`)?.toFixed(1)} statements${errors ? `; ${errors} errors` : ""}`;
    }
    if (med.linkgate && med["better-auth"]) {
      const ratio = med.linkgate / med["better-auth"];
      row.ratio = ratio.toFixed(2);
      if (scenario !== "trivial") goals.push(`${TITLES[scenario]}: ${ratio.toFixed(2)} (goal ≥ ${GOAL}: ${ratio >= GOAL ? "met" : "MISSED"})`);
    }
    rows[TITLES[scenario]] = row;
  }
  for (const [title, row] of Object.entries(rows)) {
    console.log(`\n${title}`);
    for (const [k, v] of Object.entries(row)) console.log(`  ${k.padEnd(12)} ${v}`);
  }
  console.log(`\ngoals (issue 26), linkgate / Better Auth, median flows/s:\n${goals.map((l) => `  ${l}`).join("\n")}`);
}
