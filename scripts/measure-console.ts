// `npx tsx scripts/measure-console.ts [--keep]`: how long each view of the dashboard takes to
// answer with 1,000,000 deliveries and 100,000 accounts on Postgres (the data set of
// scripts/measure-seed.ts). Each view sends the GraphQL documents the page sends
// (dashboard/src/operations.ts), in parallel as the page does, through the whole app (HTTP
// handling, credentials, limits, Pothos, Prisma); the time is until the last answer is read.
// A measurement, not a test: it prints a table and says which views, if any, took 200 ms or more.
import os from "node:os";
import { OPERATIONS } from "../dashboard/src/operations.ts";
import { BUSY_WEBHOOK, openMeasured, summary } from "./measure-seed.ts";

const RUNS = Number(process.env.RUNS ?? 30);
const WARMUP = 3;
const LIMIT_MS = 200;

const m = await openMeasured({ keep: process.argv.includes("--keep") });

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

const rows: Record<string, unknown>[] = [];
let over = 0;
for (const v of views) {
  const times: number[] = [];
  for (let i = 0; i < WARMUP + RUNS; i++) {
    const t0 = performance.now();
    const answers = await Promise.all(v.requests.map(([name, vars]) => gql(OPERATIONS[name], vars)));
    const ms = performance.now() - t0;
    if (i === 0) v.check?.(answers);
    if (i >= WARMUP) times.push(ms);
  }
  const s = summary(times);
  if (s.p95 >= LIMIT_MS) over++;
  rows.push({ view: v.view, documents: v.requests.map(([n]) => n).join(" + "), "median ms": s.median, "p95 ms": s.p95, "max ms": s.max });
}

const counts = await m.db.prisma.$queryRaw<{ deliveries: bigint; attempts: bigint; accounts: bigint; events: bigint }[]>`
  SELECT (SELECT count(*) FROM deliveries) AS deliveries, (SELECT count(*) FROM delivery_attempts) AS attempts,
         (SELECT count(*) FROM accounts) AS accounts, (SELECT count(*) FROM outbox_events) AS events`;
console.log(`machine: ${os.cpus().length} cores, load average ${os.loadavg().map((l) => l.toFixed(1)).join(" ")} (other processes share it)`);
console.log(
  `\n${Object.entries(counts[0]).map(([k, v]) => `${Number(v).toLocaleString("en")} ${k}`).join(", ")}; ${RUNS} runs per view after ${WARMUP} warm-up runs\n`,
);
console.table(rows);
console.log(over === 0 ? `every view answered within ${LIMIT_MS} ms (p95)` : `${over} view(s) took ${LIMIT_MS} ms or more (p95)`);
await m.close();
process.exit(over === 0 ? 0 : 1);
