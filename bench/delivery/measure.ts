// How a timed run is measured, the same for every system: receipts at the one receiver, from
// the commit that made the work due (a drain) or from each event's own commit (the open loop).
import type { Receipt, TestReceiver } from "../../test/support/receiver.ts";
import { openLoop } from "../load.ts";
import { withDbCpu } from "./database.ts";
import { duplicates, eventIdOf, OPEN_SECONDS, OPEN_WARMUP_SECONDS, pct, REPEAT, sleep, type Ctx, type Row, type Run } from "./shared.ts";

/**
 * Waits until the receiver has `count` requests (bounded), then returns the first `count` and
 * the CPU seconds this process (the receiver, otherwise idle) used meanwhile.
 */
export async function received(receiver: TestReceiver, count: number, timeoutMs: number): Promise<Receipt[] & { recvCpuSec: number }> {
  const cpu0 = process.cpuUsage();
  await receiver.waitFor(count, timeoutMs);
  const cpu = process.cpuUsage(cpu0);
  return Object.assign(receiver.receipts.slice(0, count), { recvCpuSec: (cpu.user + cpu.system) / 1e6 });
}

/** Waits until no request has arrived for `quietMs` (a run's stragglers), then forgets them all. */
export async function settle(receiver: TestReceiver, quietMs = 300): Promise<void> {
  for (let seen = -1; seen !== receiver.receipts.length; ) {
    seen = receiver.receipts.length;
    await sleep(quietMs);
  }
  receiver.receipts.length = 0;
}

/** A drain run: receipts counted from t0, the commit that made them all due. */
export function drainRun(t0: number, receipts: Receipt[] & { recvCpuSec: number }, dbCpuSec: number | null): Run {
  const lat = receipts.map((r) => r.at - t0).sort((a, b) => a - b);
  const seconds = (receipts[receipts.length - 1].at - t0) / 1000;
  return { rate: receipts.length / seconds, p50: pct(lat, 0.5), p99: pct(lat, 0.99), dup: duplicates(receipts), dbCpuSec, recvCpuSec: receipts.recvCpuSec };
}

/**
 * The open loop: OPEN_WARMUP_SECONDS at `rate` first, not counted (a fresh worker plans its
 * statements and warms its code; that second of start-up would otherwise be the p99), then
 * OPEN_SECONDS measured. `produce(i)` commits event i and returns its id.
 */
export async function openLoopRun(ctx: Ctx, database: string, rate: number, produce: (i: number) => Promise<string>): Promise<{ run: Run; events: number }> {
  const committedAt = new Map<string, number>();
  let i = 0;
  const once = async () => {
    const id = await produce(i++);
    committedAt.set(id, Date.now());
  };
  await settle(ctx.receiver);
  const warm = await openLoop(rate, OPEN_WARMUP_SECONDS, once);
  await received(ctx.receiver, warm.count, 60_000);
  await settle(ctx.receiver);
  const [[load, receipts], dbCpuSec] = await withDbCpu(database, async () => {
    const load = await openLoop(rate, OPEN_SECONDS, once);
    return [load, await received(ctx.receiver, load.count, 60_000)] as const;
  });
  if (warm.errors + load.errors > 0) throw new Error(`${warm.errors + load.errors} events could not be committed`);
  const lat = receipts.map((r) => r.at - committedAt.get(eventIdOf(r))!).sort((a, b) => a - b);
  return { run: { rate: load.rps, p50: pct(lat, 0.5), p99: pct(lat, 0.99), dup: duplicates(receipts), dbCpuSec }, events: load.count };
}

/**
 * One system's drains with `workers` processes, one timed run at a time, so that the
 * orchestrator can alternate two systems' runs (index.ts): a drift of the machine's speed then
 * moves both sides of each pair alike.
 */
export type DrainSide = {
  /** Timed run number `r`: its receipts from t0 to the DRAIN-th. */
  run(r: number): Promise<Run>;
  /** Stops the processes; the row of all runs made. */
  finish(runs: Run[]): Promise<Row>;
  /** Stops the processes (after a failed run). */
  stop(): Promise<unknown>;
};

/**
 * REPEAT rounds of one timed run of each side in turn; the rows, in the order of `sides`. With
 * two sides or more, each row's `pairs` are the first side's events/s over its own, round by round.
 */
export async function alternating(sides: DrainSide[]): Promise<Row[]> {
  const runs: Run[][] = sides.map(() => []);
  try {
    for (let r = 0; r < REPEAT; r++) for (const [i, side] of sides.entries()) runs[i].push(await side.run(r));
  } catch (err) {
    await Promise.all(sides.map((s) => s.stop()));
    throw err;
  }
  const rows: Row[] = [];
  for (const [i, side] of sides.entries()) {
    const row = await side.finish(runs[i]);
    if (sides.length > 1) row.pairs = runs[i].map((run, r) => runs[0][r].rate / run.rate);
    rows.push(row);
  }
  return rows;
}
