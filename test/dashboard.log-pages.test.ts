// What the dashboard's webhook list and log read, on PGlite and Postgres, with deliveries written
// straight into the database at chosen times and states: each webhook's stats count the
// deliveries created in the last 24 hours once each by state, with the newest success of any
// time; a webhook's deliveries page newest first (ties by id) with the filters, the same rows
// whatever the page size, and totalCount counts what the filters match. Another project's
// webhooks and deliveries are never counted or shown.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PENDING_COUNT_LIMIT, webhooksStats } from "../src/delivery/charts.ts";
import { replayFailed } from "../src/delivery/redelivery.ts";
import { claimDue, recordResults, releaseLeases } from "../src/delivery/sql.ts";
import { newId } from "../src/ids.ts";
import type { KeyActor } from "../src/deps.ts";
import { keyActor } from "./support/actors.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";

type Status = "pending" | "succeeded" | "failed" | "gone";
type Row = { id: string; status: Status; hoursAgo: number; completedHoursAgo?: number; type?: string };

const HOUR = 3_600_000;
const PAGE = `pageInfo { hasNextPage endCursor } edges { node { id status eventType } }`;
const Q = {
  log: `query($id: ID!, $first: Int, $after: String, $status: DeliveryStatus, $eventType: String) {
    webhook(id: $id) { deliveries(first: $first, after: $after, status: $status, eventType: $eventType) { totalCount ${PAGE} } }
  }`,
  stats: `query($first: Int!) { webhooks(first: $first) { edges { node { id stats { succeeded failed gone pending pendingCapped successRate lastSuccessAt } } } } }`,
};

describe.each(backends)("the dashboard's webhook list and log on %s", (backend) => {
  let h: Harness;
  let otherProject = "";
  /** the project's secret key and the other project's, as the services get them */
  let owner: KeyActor;
  let theirs: KeyActor;
  const now = Date.now();
  const at = (hoursAgo: number) => new Date(now - hoursAgo * HOUR);

  async function webhook(id: string, projectId: string): Promise<void> {
    await h.db.prisma.webhook.create({
      data: { id, projectId, url: `https://${id}.example.com/hook`, events: ["user.created", "user.updated"], secretSealed: "unused" },
    });
  }

  async function deliveries(webhookId: string, projectId: string, rows: Row[]): Promise<void> {
    for (const r of rows) {
      const type = r.type ?? "user.created";
      await h.db.prisma.outboxEvent.create({
        data: { id: `evt_${r.id}`, projectId, eventType: type, body: JSON.stringify({ id: `evt_${r.id}` }), createdAt: at(r.hoursAgo) },
      });
      const done = r.status !== "pending";
      await h.db.prisma.delivery.create({
        data: {
          id: r.id,
          eventId: `evt_${r.id}`,
          webhookId,
          projectId,
          eventType: type,
          status: r.status,
          attempts: done ? 1 : 0,
          createdAt: at(r.hoursAgo),
          completedAt: done ? at(r.completedHoursAgo ?? r.hoursAgo) : null,
        },
      });
    }
  }

  beforeAll(async () => {
    h = await startHarness(backend);
    otherProject = (await h.db.prisma.project.create({ data: { id: "prj_other_log", name: "other" } })).id;
    [owner, theirs] = [await keyActor(h.db, h.projectId), await keyActor(h.db, otherProject)];
    await webhook("wh_busy", h.projectId);
    await webhook("wh_quiet", h.projectId);
    await webhook("wh_never", h.projectId);
    await webhook("wh_theirs", otherProject);
    // wh_busy, in the window: 3 succeeded, 2 failed, 1 gone, 2 pending. Outside it: more of each.
    // Its newest success by creation (23 h ago) completed before an older one (20 h ago … 1 h ago).
    await deliveries("wh_busy", h.projectId, [
      { id: "dlv_b01", status: "succeeded", hoursAgo: 23, completedHoursAgo: 22.5 },
      { id: "dlv_b02", status: "succeeded", hoursAgo: 20, completedHoursAgo: 1, type: "user.updated" },
      { id: "dlv_b03", status: "succeeded", hoursAgo: 2 },
      { id: "dlv_b04", status: "failed", hoursAgo: 10, type: "user.updated" },
      { id: "dlv_b05", status: "failed", hoursAgo: 3 },
      { id: "dlv_b06", status: "gone", hoursAgo: 5 },
      { id: "dlv_b07", status: "pending", hoursAgo: 0.5, type: "user.updated" },
      { id: "dlv_b08", status: "pending", hoursAgo: 0.1 },
      { id: "dlv_b09", status: "succeeded", hoursAgo: 24.2 },
      { id: "dlv_b10", status: "failed", hoursAgo: 30 },
      { id: "dlv_b11", status: "pending", hoursAgo: 48, type: "user.updated" },
      { id: "dlv_b12", status: "gone", hoursAgo: 100 },
    ]);
    // wh_quiet: nothing in the window; its last success 3 days ago.
    await deliveries("wh_quiet", h.projectId, [
      { id: "dlv_q1", status: "succeeded", hoursAgo: 72 },
      { id: "dlv_q2", status: "failed", hoursAgo: 30 },
    ]);
    // wh_theirs (another project), in the window.
    await deliveries("wh_theirs", otherProject, [{ id: "dlv_t1", status: "succeeded", hoursAgo: 1 }]);
    // Many deliveries at the same instant, to page through ties (ordered by id among themselves).
    const tie = 6;
    await deliveries(
      "wh_never",
      h.projectId,
      Array.from({ length: 23 }, (_, i) => ({
        id: `dlv_n${String(i).padStart(2, "0")}`,
        status: (["pending", "failed", "gone"] as const)[i % 3],
        hoursAgo: i < 9 ? tie : 30 + i,
        type: i % 2 ? "user.updated" : "user.created",
      })),
    );
  });
  afterAll(async () => {
    await h?.close();
  });

  const empty = { windowHours: 24, succeeded: 0, failed: 0, gone: 0, pending: 0, pendingCapped: false, successRate: null, lastSuccessAt: null };

  it("counts each webhook's deliveries of the last 24 hours by state, with its newest success of any time", async () => {
    const stats = await webhooksStats(h.db, owner, ["wh_busy", "wh_quiet", "wh_never", "wh_theirs", "wh_nothing"]);
    expect(stats.get("wh_busy")).toEqual({
      windowHours: 24,
      succeeded: 3,
      failed: 2,
      gone: 1,
      pending: 2,
      pendingCapped: false,
      successRate: 3 / 6,
      lastSuccessAt: at(1),
    });
    expect(stats.get("wh_quiet")).toEqual({ ...empty, lastSuccessAt: at(72) });
    expect(stats.get("wh_never")).toEqual({ ...empty, failed: 3, gone: 3, pending: 3, successRate: 0 });
    // Another project's webhook, and no webhook at all: nothing counted.
    expect(stats.get("wh_theirs")).toEqual(empty);
    expect(stats.get("wh_nothing")).toEqual(empty);
    expect((await webhooksStats(h.db, theirs, ["wh_theirs"])).get("wh_theirs")).toMatchObject({ succeeded: 1, lastSuccessAt: at(1) });
  });

  /** The stats' definition, counted straight from deliveries (what the rollup must equal). */
  async function counted(webhookId: string) {
    const rows = await h.db.prisma.$queryRaw<{ succeeded: number; failed: number; gone: number; pending: number; last_ok: Date | null }[]>`
      SELECT count(*) FILTER (WHERE status = 'succeeded')::int AS succeeded, count(*) FILTER (WHERE status = 'failed')::int AS failed,
             count(*) FILTER (WHERE status = 'gone')::int AS gone, count(*) FILTER (WHERE status = 'pending')::int AS pending,
             greatest(max(completed_at) FILTER (WHERE status = 'succeeded' AND created_at >= now() - interval '24 hours'),
                      (SELECT completed_at FROM deliveries n WHERE n.webhook_id = ${webhookId} AND n.status = 'succeeded' ORDER BY created_at DESC LIMIT 1)) AS last_ok
      FROM deliveries WHERE webhook_id = ${webhookId} AND created_at >= now() - interval '24 hours'`;
    const { last_ok, ...c } = rows[0];
    return { ...c, lastSuccessAt: last_ok };
  }
  const statsOf = async (id: string) => {
    const { succeeded, failed, gone, pending, lastSuccessAt } = (await webhooksStats(h.db, owner, [id])).get(id)!;
    return { succeeded, failed, gone, pending, lastSuccessAt };
  };

  it("keeps the stats exact through every change of state: records, redeliveries, claims, disabling, deletions", async () => {
    await webhook("wh_changes", h.projectId);
    const hours = [0.2, 1, 3, 12, 23.5, 23.99, 24.5, 30];
    await deliveries(
      "wh_changes",
      h.projectId,
      hours.flatMap((hoursAgo, i) => [
        { id: `dlv_c${i}a`, status: "pending" as const, hoursAgo },
        { id: `dlv_c${i}b`, status: "pending" as const, hoursAgo },
        { id: `dlv_c${i}c`, status: "succeeded" as const, hoursAgo, completedHoursAgo: hoursAgo / 2 },
      ]),
    );
    const same = async () => expect(await statsOf("wh_changes")).toEqual(await counted("wh_changes"));
    await same();
    const rollup = () => h.db.prisma.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM dashboard.webhook_delivery_hours WHERE webhook_id = 'wh_changes'`;
    expect((await rollup())[0].n).toBeGreaterThan(3);
    const sql = (text: string) => h.db.prisma.$executeRawUnsafe(text);
    // the worker records results: a success, a retry, a failure, a gone
    await sql(`UPDATE deliveries SET status = 'succeeded', attempts = 1, completed_at = now() WHERE id IN ('dlv_c0a', 'dlv_c4a', 'dlv_c6a')`);
    await sql(`UPDATE deliveries SET attempts = 1, next_attempt_at = now() + interval '1 minute' WHERE id = 'dlv_c1a'`);
    await sql(`UPDATE deliveries SET status = 'failed', completed_at = now() WHERE id IN ('dlv_c2a', 'dlv_c5a')`);
    await sql(`UPDATE deliveries SET status = 'gone', completed_at = now() WHERE id = 'dlv_c3a'`);
    await same();
    // a claim writes only the lease
    await sql(`UPDATE deliveries SET leased_by = 'w1', lease_until = now() + interval '30 seconds' WHERE status = 'pending' AND webhook_id = 'wh_changes'`);
    await same();
    // a redelivery starts succeeded and failed ones over, the newest success among them
    await sql(`UPDATE deliveries SET status = 'pending', attempts = 0, completed_at = NULL WHERE id IN ('dlv_c0a', 'dlv_c0c', 'dlv_c2a', 'dlv_c5c')`);
    await same();
    // the webhook is disabled: its pending deliveries fail
    await sql(`UPDATE deliveries SET status = 'failed', completed_at = now() WHERE webhook_id = 'wh_changes' AND status = 'pending'`);
    await same();
    // deliveries removed, one statement for several hours
    await sql(`DELETE FROM deliveries WHERE id IN ('dlv_c1c', 'dlv_c4c', 'dlv_c3b', 'dlv_c7a')`);
    await same();
    expect((await statsOf("wh_changes")).succeeded).toBeGreaterThan(0);
    // the webhook deleted with its deliveries and its rows; the other webhooks' stats stay
    const busy = await statsOf("wh_busy");
    await sql(`DELETE FROM webhooks WHERE id = 'wh_changes'`);
    expect(await statsOf("wh_changes")).toEqual({ succeeded: 0, failed: 0, gone: 0, pending: 0, lastSuccessAt: null });
    expect(await statsOf("wh_busy")).toEqual(busy);
    expect((await rollup())[0].n).toBe(0);
  });

  it("keeps the stats exact with concurrent writers: events fanned out to two webhooks while their deliveries finish", async () => {
    await webhook("wh_con_a", h.projectId);
    await webhook("wh_con_b", h.projectId);
    const ids = Array.from({ length: 40 }, (_, i) => `dlv_con${i}`);
    // Each transaction writes an event's deliveries to both webhooks (in either order), as the
    // outbox does, and another finishes some deliveries of both, as the worker does.
    await Promise.all(
      Array.from({ length: 8 }, (_, t) =>
        h.db.prisma.$transaction(async (tx) => {
          for (let k = 0; k < 5; k++) {
            const n = t * 5 + k;
            await tx.outboxEvent.create({ data: { id: `evt_con${n}`, projectId: h.projectId, eventType: "user.created", body: "{}" } });
            const hooks = t % 2 ? ["wh_con_b", "wh_con_a"] : ["wh_con_a", "wh_con_b"];
            await tx.delivery.createMany({
              data: hooks.map((webhookId) => ({ id: `${ids[n]}_${webhookId}`, eventId: `evt_con${n}`, webhookId, projectId: h.projectId, eventType: "user.created" })),
            });
          }
          await tx.$executeRawUnsafe(
            `UPDATE deliveries SET status = $1::delivery_status, completed_at = now() WHERE webhook_id IN ('wh_con_a', 'wh_con_b') AND status = 'pending' AND id LIKE $2`,
            t % 3 ? "succeeded" : "failed",
            `dlv_con${t}%`,
          );
        }),
      ),
    );
    for (const id of ["wh_con_a", "wh_con_b"]) {
      const stats = await statsOf(id);
      expect(stats).toEqual(await counted(id));
      expect(stats.succeeded + stats.failed + stats.pending).toBe(40);
    }
  });

  it("gives as lastSuccessAt a replayed delivery created days ago that succeeded after every newer one", async () => {
    // After an outage the project replays its failed deliveries of the last days: the oldest,
    // created 3 days ago, succeeds now, after the newest delivery (created 2 h ago, delivered
    // 1.5 h ago). Its success is the latest, whenever it was created.
    await webhook("wh_replayed", h.projectId);
    await deliveries("wh_replayed", h.projectId, [
      { id: "dlv_r1", status: "failed", hoursAgo: 72, completedHoursAgo: 48 },
      { id: "dlv_r2", status: "succeeded", hoursAgo: 2, completedHoursAgo: 1.5 },
    ]);
    expect((await webhooksStats(h.db, owner, ["wh_replayed"])).get("wh_replayed")!.lastSuccessAt).toEqual(at(1.5));
    expect(await replayFailed(h.db, owner, "wh_replayed", at(96))).toBe(1);
    // the worker claims it and records its success, as it records every attempt
    const claimed = await claimDue(h.db, { workerId: "w_replay", limit: 1_000, leaseMs: 30_000, perWebhookCap: 1_000 });
    const replayed = claimed.find((c) => c.deliveryId === "dlv_r1")!;
    await releaseLeases(h.db, "w_replay", claimed.filter((c) => c !== replayed).map((c) => c.deliveryId));
    const attempt = { attemptId: newId("att"), attempt: replayed.attempt, status: "succeeded" as const, delayMs: null, statusCode: 200, error: null };
    await recordResults(h.db, "w_replay", [{ deliveryId: "dlv_r1", ...attempt, startedAt: new Date(), durationMs: 5, responseExcerpt: "ok", signedWith: [] }]);
    const { completedAt } = await h.db.prisma.delivery.findUniqueOrThrow({ where: { id: "dlv_r1" } });
    expect(completedAt!.getTime()).toBeGreaterThan(at(1.5).getTime());
    expect((await webhooksStats(h.db, owner, ["wh_replayed"])).get("wh_replayed")).toMatchObject({ succeeded: 1, failed: 0, lastSuccessAt: completedAt });
    await h.db.prisma.webhook.delete({ where: { id: "wh_replayed" } });
  });

  it("stops counting a webhook's pending deliveries at 10,000, and says so", async () => {
    // A receiver that has failed all day can leave millions pending: one request of the list
    // must not count them all.
    await webhook("wh_backlog", h.projectId);
    const add = (n: number, from: number) => h.db.prisma.$executeRawUnsafe(`
      WITH ev AS (
        INSERT INTO outbox_events (id, project_id, event_type, body)
        SELECT 'evt_bl_' || i, '${h.projectId}', 'user.created', '{}' FROM generate_series(${from}, ${from + n - 1}) i RETURNING id
      )
      INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type) SELECT 'dlv_' || substr(id, 5), id, 'wh_backlog', '${h.projectId}', 'user.created' FROM ev`);
    await add(PENDING_COUNT_LIMIT, 1);
    expect((await webhooksStats(h.db, owner, ["wh_backlog"])).get("wh_backlog")).toMatchObject({ pending: PENDING_COUNT_LIMIT, pendingCapped: false });
    await add(1, PENDING_COUNT_LIMIT + 1);
    expect((await webhooksStats(h.db, owner, ["wh_backlog"])).get("wh_backlog")).toMatchObject({ pending: PENDING_COUNT_LIMIT, pendingCapped: true });
    await h.db.prisma.webhook.delete({ where: { id: "wh_backlog" } });
  });

  it("gives the same stats through GraphQL, one statement for the whole list", async () => {
    const r = await h.gql(Q.stats, { first: 10 });
    expect(r.body.errors).toBeUndefined();
    const byId = Object.fromEntries(r.body.data.webhooks.edges.map((e: any) => [e.node.id, e.node.stats]));
    expect(byId.wh_busy).toEqual({ succeeded: 3, failed: 2, gone: 1, pending: 2, pendingCapped: false, successRate: 0.5, lastSuccessAt: at(1).toISOString() });
    expect(byId.wh_quiet).toMatchObject({ succeeded: 0, successRate: null, lastSuccessAt: at(72).toISOString() });
    expect(byId.wh_theirs).toBeUndefined();
  });

  /** Every page of a webhook's log with this page size and filters, and the totalCount of each. */
  async function allPages(id: string, first: number, filters: { status?: Status; eventType?: string } = {}) {
    const ids: string[] = [];
    const counts = new Set<number>();
    let after: string | null = null;
    for (let pages = 0; pages < 50; pages++) {
      const r = await h.gql(Q.log, { id, first, after, ...filters });
      expect(r.body.errors, JSON.stringify(r.body.errors)).toBeUndefined();
      const c = r.body.data.webhook.deliveries;
      counts.add(c.totalCount);
      ids.push(...c.edges.map((e: any) => e.node.id));
      if (!c.pageInfo.hasNextPage) return { ids, counts: [...counts] };
      after = c.pageInfo.endCursor;
    }
    throw new Error("the log never ended");
  }

  /** The log's order, straight from the table: newest first, ties by id (descending). */
  async function expected(webhookId: string, where: { status?: Status; eventType?: string } = {}) {
    const rows = await h.db.prisma.delivery.findMany({ where: { webhookId, ...where }, orderBy: [{ createdAt: "desc" }, { id: "desc" }], select: { id: true } });
    return rows.map((r) => r.id);
  }

  it("pages a webhook's deliveries newest first, ties by id, the same rows at any page size", async () => {
    for (const id of ["wh_busy", "wh_never"]) {
      const all = await expected(id);
      for (const first of [2, 7, 100]) expect(await allPages(id, first)).toEqual({ ids: all, counts: [all.length] });
    }
    expect((await allPages("wh_never", 2)).ids.slice(0, 9)).toEqual(
      Array.from({ length: 9 }, (_, i) => `dlv_n0${8 - i}`),
    );
  });

  it("pages with the filters, and totalCount counts what they match", async () => {
    for (const filters of [{ status: "failed" as const }, { eventType: "user.updated" }, { status: "pending" as const, eventType: "user.updated" }]) {
      const all = await expected("wh_never", filters);
      expect(all.length).toBeGreaterThan(2);
      expect(await allPages("wh_never", 2, filters)).toEqual({ ids: all, counts: [all.length] });
    }
    const none = await h.gql(Q.log, { id: "wh_quiet", first: 5, status: "pending" });
    expect(none.body.data.webhook.deliveries).toEqual({ totalCount: 0, pageInfo: { hasNextPage: false, endCursor: null }, edges: [] });
  });

  it("shows another project's webhook as none, and counts alone when only totalCount is asked", async () => {
    const theirs = await h.gql(Q.log, { id: "wh_theirs", first: 5 });
    expect(theirs.body.data.webhook).toBeNull();
    const count = await h.gql(`query($id: ID!) { webhook(id: $id) { deliveries(status: failed) { totalCount } } }`, { id: "wh_busy" });
    expect(count.body.data.webhook.deliveries).toEqual({ totalCount: 3 });
  });
});
