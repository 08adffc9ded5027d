// `npx tsx scripts/measure-dashboard.ts [--keep]`: how long each view of the dashboard takes to
// answer with 1,000,000 deliveries and 100,000 accounts on Postgres (the data set of
// scripts/measure-seed.ts). Each view sends the GraphQL documents the page sends
// (dashboard/src/operations.ts), in parallel as the page does, through the whole app (HTTP
// handling, credentials, limits, Pothos, Prisma); the time is until the last answer is read.
// A measurement, not a test: it prints a table and says which views, if any, took 200 ms or more.
// `npm run bench -- dashboard` runs the same measurement (bench/dashboard.ts).
import os from "node:os";
import { pathToFileURL } from "node:url";
import { OPERATIONS } from "../dashboard/src/operations.ts";
import { BUSY_WEBHOOK, openMeasured, summary, type Measured } from "./measure-seed.ts";

const WARMUP = 3;
/** The goal of issue 14: each view answers in under this, at the 95th percentile. */
export const LIMIT_MS = 200;

export type ViewTiming = { view: string; documents: string; "median ms": number; "p95 ms": number; "max ms": number };
export type DashboardMeasurement = { rows: ViewTiming[]; counts: string; machine: string };

/** Times every view of the dashboard on the seeded database, `runs` times each after warm-up runs. */
export async function measureDashboard(opts: { keep: boolean; runs: number }): Promise<DashboardMeasurement> {
  const m = await openMeasured({ keep: opts.keep });
  try {
    return await measureViews(m, opts.runs);
  } finally {
    await m.close();
  }
}

async function measureViews(m: Measured, runs: number): Promise<DashboardMeasurement> {
  async function gql(query: string, variables: Record<string, unknown>): Promise<any> {
    const res = await m.app.fetch(
      new Request("http://measure.local/graphql", {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json", "x-api-key": m.apiKey },
        body: JSON.stringify({ query, variables }),
      }),
    );
    const body = await res.json();
    if (body.errors) throw new Error(`${query.slice(0, 60)}…: ${JSON.stringify(body.errors)}`);
    return body.data;
  }

  type Request_ = [name: keyof typeof OPERATIONS, variables: Record<string, unknown>];
  type View = { view: string; requests: Request_[]; check?: (answers: any[]) => void };

  const failedDelivery = await m.db.prisma.delivery.findFirstOrThrow({ where: { webhookId: BUSY_WEBHOOK, status: "failed" }, orderBy: { createdAt: "desc" } });
  const firstPage = await gql(OPERATIONS.WebhookLog, { id: BUSY_WEBHOOK, first: 20, status: null, eventType: null });
  const after = firstPage.webhook.deliveries.pageInfo.endCursor;
  const log = { id: BUSY_WEBHOOK, first: 20, status: null, eventType: null };

  const views: View[] = [
    { view: "overview: webhooks + project chart (24 h)", requests: [["Overview", { first: 100 }], ["ProjectChart", { range: "day" }]] },
    { view: "overview: project chart (7 days)", requests: [["ProjectChart", { range: "week" }]] },
    {
      view: "webhook (500,000 deliveries): log + chart (24 h)",
      requests: [["WebhookLog", log], ["WebhookChart", { id: BUSY_WEBHOOK, range: "day" }]],
      check: ([page]) => {
        if (page.webhook.deliveries.edges.length !== 20) throw new Error("the log page is not full");
      },
    },
    { view: "webhook: chart (7 days)", requests: [["WebhookChart", { id: BUSY_WEBHOOK, range: "week" }]] },
    { view: "webhook log: next page", requests: [["MoreDeliveries", { ...log, after }]] },
    { view: "webhook log: status failed", requests: [["WebhookLog", { ...log, status: "failed" }]] },
    { view: "webhook log: event type user.updated", requests: [["WebhookLog", { ...log, eventType: "user.updated" }]] },
    {
      view: "webhook log: search by event id",
      requests: [["FindEvent", { eventId: failedDelivery.eventId, webhookId: BUSY_WEBHOOK }]],
      check: ([found]) => {
        if (found.event.deliveries.length !== 1) throw new Error("the event's delivery was not found");
      },
    },
    ...(["email", "phone", "accountId"] as const).map(
      (by): View => ({
        view: `users: look up by ${by === "accountId" ? "account id" : by === "email" ? "e-mail" : "phone"} (merged account)`,
        requests: [["LookupAccount", { [by]: by === "email" ? m.sample.email : by === "phone" ? m.sample.phone : m.sample.accountId }]],
        check: ([found]) => {
          const a = found.lookupAccount.account;
          if (a?.id !== m.sample.accountId || a.mergePartner?.id !== m.sample.partnerId || a.recentEvents.length === 0) {
            throw new Error(`the sample account was not found whole: ${JSON.stringify(found).slice(0, 200)}`);
          }
        },
      }),
    ),
  ];

  const rows: ViewTiming[] = [];
  for (const v of views) {
    const times: number[] = [];
    for (let i = 0; i < WARMUP + runs; i++) {
      const t0 = performance.now();
      const answers = await Promise.all(v.requests.map(([name, vars]) => gql(OPERATIONS[name], vars)));
      const ms = performance.now() - t0;
      if (i === 0) v.check?.(answers);
      if (i >= WARMUP) times.push(ms);
    }
    const s = summary(times);
    rows.push({ view: v.view, documents: v.requests.map(([n]) => n).join(" + "), "median ms": s.median, "p95 ms": s.p95, "max ms": s.max });
  }

  const counts = await m.db.prisma.$queryRaw<{ deliveries: bigint; attempts: bigint; accounts: bigint; events: bigint }[]>`
    SELECT (SELECT count(*) FROM deliveries) AS deliveries, (SELECT count(*) FROM delivery_attempts) AS attempts,
           (SELECT count(*) FROM accounts) AS accounts, (SELECT count(*) FROM outbox_events) AS events`;
  return {
    rows,
    counts: `${Object.entries(counts[0]).map(([k, v]) => `${Number(v).toLocaleString("en")} ${k}`).join(", ")}; ${runs} runs per view after ${WARMUP} warm-up runs`,
    machine: `machine: ${os.cpus().length} cores, load average ${os.loadavg().map((l) => l.toFixed(1)).join(" ")} (other processes share it)`,
  };
}

/** One line per view: met when its p95 is under LIMIT_MS. */
export function goalLines(rows: ViewTiming[]): string[] {
  return rows.map((r) => `${r["p95 ms"] < LIMIT_MS ? "met   " : "MISSED"} ${r.view}: p95 ${r["p95 ms"]} ms (median ${r["median ms"]} ms), goal under ${LIMIT_MS} ms`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const result = await measureDashboard({ keep: process.argv.includes("--keep"), runs: Number(process.env.RUNS ?? 30) });
  console.log(`${result.machine}\n\n${result.counts}\n`);
  console.table(result.rows);
  const lines = goalLines(result.rows);
  console.log(lines.join("\n"));
  const over = lines.filter((l) => l.startsWith("MISSED")).length;
  console.log(over === 0 ? `every view answered within ${LIMIT_MS} ms (p95)` : `${over} view(s) took ${LIMIT_MS} ms or more (p95)`);
  process.exit(over === 0 ? 0 : 1);
}
