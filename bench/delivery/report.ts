// The tables: a row from a part's timed runs, the whole table with the statements' costs, and
// the ratios of issue 11 against their goals (what bench/RESULTS.md quotes).
import type { StatementCost } from "../delivery-statements.ts";
import { BIG, BIG_PGLITE, DRAIN, n, OPEN_RATE, OPEN_RATES, REPEAT, round1, short, type ChildReport, type Row, type Run } from "./shared.ts";

export const senderCpuPerEvent = (reports: ChildReport[]) => {
  const cpu = reports.reduce((s, r) => s + r.cpuUs, 0);
  const events = reports.reduce((s, r) => s + r.events, 0);
  return events > 0 && Number.isFinite(cpu) ? Math.round(cpu / events) : "-";
};

/** A row from its runs: the median run's figures, all runs' events/s, CPU per event over all runs. */
export function row(system: string, workers: number, scenario: string, runs: Run[], reports: ChildReport[], events: number): Row {
  const median = [...runs].sort((a, b) => a.rate - b.rate)[Math.floor(runs.length / 2)];
  const perEvent = (sec: (r: Run) => number | null | undefined) =>
    runs.every((r) => typeof sec(r) === "number") ? Math.round((runs.reduce((s, r) => s + sec(r)!, 0) * 1e6) / events) : "-";
  return {
    system,
    workers,
    scenario,
    "events/s": Math.round(median.rate),
    runs: runs.length > 1 ? runs.map((r) => Math.round(r.rate)).join(" ") : "-",
    "p50 ms": round1(median.p50),
    "p99 ms": round1(median.p99),
    "sender CPU µs/ev": senderCpuPerEvent(reports),
    "db CPU µs/ev": perEvent((r) => r.dbCpuSec),
    "receiver CPU µs/ev": perEvent((r) => r.recvCpuSec),
    "HOT upd": "-",
    dup: runs.reduce((s, r) => s + r.dup, 0),
  };
}

/** The table, the statements' costs, and the goals; `took` and the load averages head it. */
export function printReport(rows: Row[], costs: StatementCost[], took: { seconds: number; loadAtStart: string; loadAtEnd: string }): void {
  console.log(
    `\n## webhook delivery (receiver, senders and database share the machine; events/s = median of ${REPEAT} runs, all runs listed; ` +
      `${took.seconds} s; load average ${took.loadAtStart} at the start, ${took.loadAtEnd} at the end)\n`,
  );
  console.table(rows.map(({ pairs: _, ...columns }) => columns));
  if (costs.length > 0) {
    console.log("\nthe two hot statements on their own (Postgres; claim 50 → record 50, one call at a time):");
    console.table(costs);
  }
  printGoals(rows);
}

const OURS = { postgres: "ours (linkgate)", pglite: "ours (linkgate), PGlite" } as const;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** One line per backend: the ratios of issue 11 against its goals. */
function printGoals(rows: Row[]): void {
  const find = (system: string, workers: number, scenario: string) => rows.find((r) => r.system === system && r.workers === workers && r.scenario.includes(scenario));
  const ratio = (a?: Row, b?: Row) => (a && b ? a["events/s"] / b["events/s"] : NaN);
  const verdict = (x: number, goal: number, atLeast = true, unit = "") =>
    `${Number.isNaN(x) ? "n/a" : x.toFixed(2) + unit} (goal ${atLeast ? "≥" : "≤"} ${goal}${unit}: ${Number.isNaN(x) ? "not run" : (atLeast ? x >= goal : x <= goal) ? "met" : "MISSED"})`;
  const bare = find("ceiling: bare loop, no db", 1, "POSTs");
  console.log(`goals (ratios of events/s; "drain" = the ${n(DRAIN)}-pending drain, "bare loop" = the ceiling with 1 process):`);
  for (const backend of ["postgres", "pglite"] as const) {
    const ours = OURS[backend];
    const drain = (w: number) => find(ours, w, "all drained");
    const parts = [`drain/bare loop, 1 worker ${verdict(ratio(drain(1), bare), 0.75)}`];
    if (backend === "postgres") {
      for (const w of [1, 4]) {
        const gw = find("graphile-worker 0.17", w, "all drained");
        const label = `drain/graphile-worker, ${w} worker${w > 1 ? "s" : ""}`;
        // Runs made alternating: the median of the pairs' ratios, each pair run back to back.
        if (gw?.pairs && drain(w)) parts.push(`${label} ${verdict(median(gw.pairs), 1.1)} (median of ${gw.pairs.length} alternating pairs: ${gw.pairs.map((x) => x.toFixed(2)).join(", ")})`);
        else parts.push(`${label} ${verdict(ratio(drain(w), gw), 1.1)}`);
      }
      for (const w of [1, 4]) parts.push(`${short(BIG)}/${short(DRAIN)} pending, ${w} worker${w > 1 ? "s" : ""} ${verdict(ratio(find(ours, w, "timed"), drain(w)), 0.9)}`);
    } else {
      parts.push("drain/graphile-worker n/a (graphile-worker needs Postgres)");
      parts.push(`${short(BIG_PGLITE)}/${short(DRAIN)} pending, 1 worker ${verdict(ratio(find(ours, 1, "timed"), drain(1)), 0.9)}`);
    }
    for (const rate of backend === "postgres" ? OPEN_RATES : [OPEN_RATE]) {
      const open = find(ours, 1, `open loop: ${n(rate)}/s`);
      // A producer that fell short of the rate measured the latency at a lower load: not the goal's.
      if (open && open["events/s"] < 0.95 * rate) {
        parts.push(`p99 commit → receipt at ${n(rate)}/s not measurable here: the producer committed ${n(open["events/s"])}/s (p99 ${open["p99 ms"]} ms at that rate; goal ≤ 20 ms at ${n(rate)}/s)`);
      } else parts.push(`p99 commit → receipt at ${n(rate)}/s ${verdict(open ? open["p99 ms"] : NaN, 20, false, " ms")}`);
    }
    console.log(`  ${backend}: ${parts.join("; ")}`);
  }
}
