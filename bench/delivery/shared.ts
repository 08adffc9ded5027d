// What the orchestrator and its child processes must agree on: the settings every system is
// measured with, the shapes of the reports children print and the rows of the table, and the
// envelope every system sends. Kept apart so that a child loads none of the orchestrator.
import type { MasterKey } from "../../src/crypto.ts";
import type { Receipt, TestReceiver } from "../../test/support/receiver.ts";

export const CONFIG = { retryScheduleMs: [1_000, 2_000, 3_000, 4_000, 5_000], webhookTimeoutMs: 5_000, webhookAllowPrivate: true };
/** Sends in flight per process, for every system measured. */
export const CONCURRENCY = 50;
/** Our worker: deliveries per claim (and prefetched; at most CONCURRENCY), per-webhook cap, connections per process. */
export const BATCH = Number(process.env.BENCH_DELIVERY_BATCH ?? 50);
/** Per-webhook cap (BENCH_DELIVERY_CAP for a trial): 10 webhooks x 20 = room for 4 workers x 50 in flight. */
export const PER_WEBHOOK_CAP = Number(process.env.BENCH_DELIVERY_CAP ?? 20);
export const POOL = Number(process.env.BENCH_DELIVERY_POOL ?? 4);
export const HOOKS = 10;
export const DRAIN = 10_000;
/** The big backlog; BENCH_DELIVERY_BIG overrides it for a quick trial. */
export const BIG = Number(process.env.BENCH_DELIVERY_BIG ?? 1_000_000);
/**
 * PGlite's big backlog. An in-memory PGlite holds ~3.3 KB per pending delivery (event, delivery,
 * their indexes), so a million would need ~3.3 GB, past what its WebAssembly memory can address;
 * on a file-backed PGlite, seeding a million took over ten minutes (both tried). 200,000 is
 * twenty times the small backlog, enough to show whether the claim's cost grows with it.
 */
export const BIG_PGLITE = Number(process.env.BENCH_DELIVERY_BIG_PGLITE ?? 200_000);
/** PGlite seeds in statements of at most this many rows (one statement of a million did not finish). */
export const SEED_CHUNK = 50_000;
/** PGlite's open loop (its database runs on the worker's own thread: 2,000/s is past what it can commit). */
export const OPEN_RATE = 500;
/** The Postgres open loops, each measured (issue 26: commit → receipt p99 ≤ 20 ms at 2,000/s). */
export const OPEN_RATES = [500, 2_000];
export const OPEN_SECONDS = 10;
export const OPEN_WARMUP_SECONDS = 2;
export const WARMUP = 2_000;
/** Timed runs per throughput row (the median is shown): other load on the machine varies. */
export const REPEAT = 5;
/** graphile-worker as worker.graphile.org/docs/performance tunes it for throughput. */
export const GW_TUNING = {
  concurrency: CONCURRENCY, // concurrentJobs
  maxPoolSize: CONCURRENCY + 1, // "concurrency + 1"
  pollInterval: 1_000, // only for future/retried jobs; new ones arrive by LISTEN/NOTIFY (ours: same 1 s backstop)
  noPreparedStatements: false, // prepared statements on
  localQueue: { size: 500 }, // jobs fetched and locked in batches (the docs' perf setup)
  completeJobBatchDelay: 0, // completions batched
  failJobBatchDelay: 0,
};

export type Row = {
  system: string;
  workers: number;
  scenario: string;
  "events/s": number;
  runs: string;
  "p50 ms": number;
  "p99 ms": number;
  "sender CPU µs/ev": number | string;
  "db CPU µs/ev": number | string;
  "receiver CPU µs/ev": number | string;
  /** Of the UPDATEs of `deliveries` over the runs, the share that were HOT. */
  "HOT upd": string;
  /** Runs made alternating with other systems' (measure.ts alternating): the first system's events/s over this one's, round by round. Not a column. */
  pairs?: number[];
  dup: number;
};
export type Hook = { url: string; secretSealed: string };
export type ChildReport = { cpuUs: number; events: number; lat?: number[] };
/** What the PGlite child answers to a command (one JSON line each). */
export type PgliteAnswer = { t0?: number; seededSec?: number; committed?: Record<string, number>; errors?: number };

export const pct = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
export const round1 = (n: number) => Math.round(n * 10) / 10;
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const eventIdOf = (r: Receipt) => String(r.headers["x-service-event-id"]);
export const duplicates = (rs: Receipt[]) => rs.length - new Set(rs.map(eventIdOf)).size;
export const n = (x: number) => x.toLocaleString("en");
/** 1,000,000 → "1M", 200,000 → "200k". */
export const short = (x: number) => (x % 1_000_000 === 0 ? `${x / 1_000_000}M` : `${x / 1_000}k`);

/** The envelope enqueue() writes (outbox.ts): same fields, same size. */
export const envelope = (id: string, projectId: string, i: number) =>
  JSON.stringify({ id, event_type: "user.created", created_at: new Date().toISOString(), project_id: projectId, data: { user: { user_id: `acc_${i}` } } });

/** What every part of a run is given: the one receiver, the master key, the migrated template database. */
export type Ctx = { receiver: TestReceiver; masterKey: MasterKey; template: string };
/** One timed run: events/s, latency percentiles, duplicates, database and receiver CPU seconds (null: unknown). */
export type Run = { rate: number; p50: number; p99: number; dup: number; dbCpuSec: number | null; recvCpuSec?: number | null };
