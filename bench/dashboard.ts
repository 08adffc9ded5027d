// `npm run bench -- dashboard`: the goal of issue 14, each view of the dashboard answers in under
// 200 ms with 1,000,000 deliveries and 100,000 accounts, on Postgres. The measurement is
// scripts/measure-dashboard.ts (the GraphQL documents each view sends, through the whole app) on
// the data set of scripts/measure-seed.ts, which takes several minutes to write: BENCH_KEEP=1
// keeps that database for the next run (then reused), otherwise it is dropped at the end.
import { goalLines, LIMIT_MS, measureDashboard } from "../scripts/measure-dashboard.ts";

export async function main(): Promise<void> {
  console.log(`\n## console: each view of the dashboard with 1,000,000 deliveries and 100,000 accounts (Postgres)\n`);
  const result = await measureDashboard({ keep: process.env.BENCH_KEEP === "1", runs: Number(process.env.BENCH_RUNS ?? 30) });
  console.log(`${result.machine}\n${result.counts}\n`);
  console.table(result.rows);
  console.log(`goals (issue 14, p95 under ${LIMIT_MS} ms):\n${goalLines(result.rows).map((l) => `  ${l}`).join("\n")}`);
}
