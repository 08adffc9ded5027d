// `npm run bench -- <name…>`: link and delivery by default; signin, soak, fairness, dashboard and start only when named. Prints a table per benchmark.
import os from "node:os";
import pg from "pg";
import type { Backend } from "../test/support/db.ts";

const wanted = process.argv.slice(2);
const all = wanted.length === 0;

async function postgresReachable(): Promise<boolean> {
  process.env.TEST_DATABASE_URL ||= process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
  const client = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.end();
    return true;
  } catch {
    return false;
  }
}

const backends: Backend[] = (await postgresReachable()) ? ["pglite", "postgres"] : ["pglite"];
console.log(`machine: ${os.cpus().length} × ${os.cpus()[0]?.model}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, ${new Date().toISOString()}`);

if (all || wanted.includes("link")) {
  // test/support/db.ts reads the server URL at import; import it after it is set.
  const { benchLink: run } = await import("./link.ts");
  console.log("\n## link flows (REST request + verify) vs trivial GraphQL requests\n");
  const { rows, goalLines } = await run(backends);
  // one column per backend: the figures are too many to read side by side
  const figures = Object.keys(rows[0] ?? {}).filter((k) => k !== "backend");
  console.table(Object.fromEntries(figures.map((f) => [f, Object.fromEntries(rows.map((r) => [r.backend, r[f]]))])));
  console.log(`goals (issue 11):\n${goalLines.map((l) => `  ${l}`).join("\n")}`);
}
if (wanted.includes("signin")) {
  // Postgres only, and only when asked for: 3 scenarios × 2 systems × 3 runs of 30 s (about 6 minutes with the pool's sign-ins).
  const { main: signin } = await import("./signin.ts");
  await signin();
}
if (wanted.includes("soak")) {
  // Postgres only, and only when asked for: 30 simulated days in a few minutes.
  const { main: soak } = await import("./soak.ts");
  await soak();
}
if (all || wanted.includes("delivery")) {
  const mod = await import("./delivery/index.ts").catch(() => null);
  if (mod && "main" in mod) await (mod as { main: () => Promise<void> }).main();
  else console.log("\n(delivery benchmark not available)");
}
if (wanted.includes("fairness")) {
  // On Postgres only, and only when asked for: about 1.5 minutes.
  const { main: fairness } = await import("./fairness.ts");
  await fairness();
}
if (wanted.includes("dashboard")) {
  // Postgres only, and only when asked for: seeding its data set takes minutes (BENCH_KEEP=1 keeps it).
  const { main: dashboardViews } = await import("./dashboard.ts");
  await dashboardViews();
}
if (wanted.includes("start")) {
  // Only when asked for: starts and stops the server about 30 times (about a minute).
  const { main: start } = await import("./start.ts");
  await start();
}
