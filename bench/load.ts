// Bounded load loops against a server on loopback: closed loop (N workers as fast as they
// can, for a fixed time) and open loop (a fixed arrival rate, for a fixed time).
export type RunResult = { count: number; errors: number; seconds: number; rps: number; p50: number; p99: number };

function summarize(latencies: number[], errors: number, seconds: number): RunResult {
  const sorted = [...latencies].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return { count: sorted.length, errors, seconds, rps: sorted.length / seconds, p50: at(0.5), p99: at(0.99) };
}

export async function closedLoop(concurrency: number, seconds: number, op: (worker: number) => Promise<void>): Promise<RunResult> {
  const latencies: number[] = [];
  let errors = 0;
  const end = performance.now() + seconds * 1000;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      while (performance.now() < end) {
        const t = performance.now();
        try {
          await op(w);
          latencies.push(performance.now() - t);
        } catch {
          errors++;
        }
      }
    }),
  );
  return summarize(latencies, errors, (performance.now() - start) / 1000);
}

export async function openLoop(rate: number, seconds: number, op: (i: number) => Promise<void>): Promise<RunResult> {
  const latencies: number[] = [];
  let errors = 0;
  const total = Math.max(1, Math.floor(rate * seconds));
  const start = performance.now();
  const pending: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const t = performance.now();
    pending.push(
      op(i).then(
        () => void latencies.push(performance.now() - t),
        () => void errors++,
      ),
    );
  }
  await Promise.all(pending);
  return summarize(latencies, errors, (performance.now() - start) / 1000);
}
