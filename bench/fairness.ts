// Fairness benchmark: `npm run bench -- fairness`, or `npx tsx bench/fairness.ts`.
// Needs a Postgres server (TEST_DATABASE_URL, DATABASE_URL, or postgres://postgres@127.0.0.1:5432/test);
// each scenario gets its own database there, dropped at the end. About 1.5 minutes.
//
// Four webhooks, each in its own project and each with a BACKLOG of pending deliveries: one
// healthy (a loopback receiver that answers 200 at once) and three dead (receivers that accept
// the connection and never answer, so every attempt waits the whole timeout: the production
// default of 10 s). The same run without the dead ones is the baseline. One worker, in this
// process, with the settings `npm run worker` uses (50 sends in flight, claims of 50, a cap of
// 20 leases per webhook, the default breaker).
//
// * drain: the backlogs are committed before the worker starts; t0 is its start, so every
//   backlog delivery is "committed at t0" and p50/p99 are t0 → receipt at the healthy receiver
//   over its whole backlog (queueing behind its own backlog: about half and all of its drain
//   time). Before the breaker, three dead webhooks at the cap (60 leases) could hold all 50 slots
//   for the whole timeout, so this is where the healthy webhook would have starved.
// * open loop: then, while the dead backlogs are still there (the breakers open and probing),
//   OPEN_RATE new events a second for OPEN_SECONDS to the healthy webhook's project, each
//   committed on its own through enqueue(): p50/p99 of commit → receipt.
// Goal (issue 15): the healthy webhook's p99 with the dead ones present within 2× of without.
//
// BENCH_FAIRNESS_BACKLOG overrides the backlog (default 10,000 per webhook, as the issue asks).
import { loadavg } from "node:os";
import { enqueue } from "../src/webhooks/outbox.ts";
import { startWorker } from "../src/delivery/worker.ts";
import { openTestDatabase, type TestDatabase } from "../test/support/db.ts";
import { bulkEnqueue, newMasterKey, seedWebhook, TestReceiver, type Receipt, type SeededWebhook } from "../test/support/receiver.ts";

const BACKLOG = Number(process.env.BENCH_FAIRNESS_BACKLOG ?? 10_000);
const DEAD = 3;
const CONFIG = { retryScheduleMs: [10_000, 30_000, 60_000, 300_000, 1_800_000], webhookTimeoutMs: 10_000, webhookAllowPrivate: true };
/** Low enough that this process (enqueue through Prisma, receivers, worker) keeps up on a busy 2-core machine. */
const OPEN_RATE = 50;
const OPEN_SECONDS = 10;

type Scenario = {
  scenario: string;
  "drain s": string;
  "drain p50 ms": number;
  "drain p99 ms": number;
  "open-loop p50 ms": number;
  "open-loop p99 ms": number;
  "dead: attempts": string;
  "dead: breakers": string;
};

const pct = (sorted: number[], q: number) => Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN);
const sortedNums = (xs: number[]) => [...xs].sort((a, b) => a - b);
const log = (msg: string) => console.error(`[bench fairness] ${msg}`);

/** Resolves when `receiver` holds `n` receipts; rejects after `timeoutMs`. */
async function receipts(receiver: TestReceiver, n: number, timeoutMs: number): Promise<Receipt[]> {
  return receiver.waitFor(n, timeoutMs);
}

async function run(withDead: boolean): Promise<Scenario> {
  const db: TestDatabase = await openTestDatabase("postgres", { poolSize: 8 });
  const masterKey = newMasterKey();
  const healthy = await TestReceiver.start({ status: 200 });
  const dead = await Promise.all(Array.from({ length: withDead ? DEAD : 0 }, () => TestReceiver.start({ status: 200, delayMs: 3_600_000 })));
  try {
    const h = await seedWebhook(db, masterKey, { url: healthy.url });
    const d: SeededWebhook[] = [];
    for (const r of dead) d.push(await seedWebhook(db, masterKey, { url: r.url }));
    for (const hook of [h, ...d]) await bulkEnqueue(db, hook.projectId, BACKLOG);
    await db.prisma.$executeRawUnsafe("VACUUM ANALYZE deliveries");
    log(`${withDead ? `healthy + ${DEAD} dead` : "healthy alone"}: ${BACKLOG.toLocaleString("en")} pending each; worker starts`);

    const t0 = Date.now();
    const w = startWorker({ db, config: CONFIG, masterKey, maintenanceIntervalMs: 0 });
    try {
      const drained = await receipts(healthy, BACKLOG, 300_000);
      const drainMs = Math.max(...drained.map((r) => r.at)) - t0;
      const drain = sortedNums(drained.map((r) => r.at - t0));

      // Open loop: fresh events for the healthy webhook only, each committed on its own.
      const committedAt = new Map<string, number>();
      const start = performance.now();
      const total = OPEN_RATE * OPEN_SECONDS;
      const pending: Promise<void>[] = [];
      for (let i = 0; i < total; i++) {
        const wait = start + (i * 1000) / OPEN_RATE - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        pending.push(
          db.prisma
            .$transaction((tx) => enqueue(tx, { projectId: h.projectId, eventType: "user.created", data: { user: { user_id: `acc_${i}` } } }), { maxWait: 60_000 })
            .then((eventId) => void committedAt.set(eventId, Date.now())),
        );
      }
      await Promise.all(pending);
      const all = await receipts(healthy, BACKLOG + total, 60_000);
      const open = sortedNums(
        all.slice(BACKLOG).flatMap((r) => {
          const at = committedAt.get(String(r.headers["x-service-event-id"]));
          return at === undefined ? [] : [Math.max(0, r.at - at)];
        }),
      );
      return {
        scenario: withDead ? `healthy + ${DEAD} dead (never answer, 10 s timeout)` : "healthy alone",
        "drain s": (drainMs / 1000).toFixed(1),
        "drain p50 ms": pct(drain, 0.5),
        "drain p99 ms": pct(drain, 0.99),
        "open-loop p50 ms": pct(open, 0.5),
        "open-loop p99 ms": pct(open, 0.99),
        "dead: attempts": withDead ? dead.map((r) => r.receipts.length).join(" ") : "-",
        // (optional call: the same file also ran on the build before the breaker, for RESULTS.md)
        "dead: breakers": withDead ? d.map((x) => (w as Partial<typeof w>).endpoint?.(x.webhookId).state ?? "-").join(" ") : "-",
      };
    } finally {
      await w.abandon(); // the dead receivers' sends would otherwise wait out the timeout
    }
  } finally {
    await Promise.all([healthy, ...dead].map((r) => r.close()));
    await db.close();
  }
}

export async function main(): Promise<void> {
  const loadAtStart = loadavg().map((l) => l.toFixed(1)).join(" ");
  const started = performance.now();
  const alone = await run(false);
  const withDead = await run(true);
  const seconds = Math.round((performance.now() - started) / 1000);
  console.log(`\n## fairness under dead receivers (Postgres; one worker, 50 in flight, cap 20; ${BACKLOG.toLocaleString("en")} pending per webhook; ${OPEN_RATE}/s open loop for ${OPEN_SECONDS} s; ${seconds} s)\n`);
  console.table([alone, withDead]);
  const ratio = (a: number, b: number) => (b > 0 ? a / b : NaN);
  const drainRatio = ratio(withDead["drain p99 ms"], alone["drain p99 ms"]);
  const openRatio = ratio(withDead["open-loop p99 ms"], alone["open-loop p99 ms"]);
  const verdict = (r: number) => (r <= 2 ? "met" : "MISSED");
  console.log(`goal (healthy webhook's p99 with ${DEAD} dead ones present ≤ 2 × without):`);
  console.log(`  backlog drain, t0 → receipt: ${drainRatio.toFixed(2)} (${verdict(drainRatio)})`);
  console.log(`  open loop, commit → receipt: ${openRatio.toFixed(2)} (${verdict(openRatio)})`);
  console.log(`load average at start ${loadAtStart}, at end ${loadavg().map((l) => l.toFixed(1)).join(" ")}`);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
