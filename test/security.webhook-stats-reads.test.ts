// A webhook's stats (Webhook.stats, the dashboard's webhook list) read a 24-hour window, with
// `pending` stopped at 10,000 (docs/graphql.md, "Operation limits"). Their lastSuccessAt also
// looked for the newest successful delivery in the log, for successes older than
// dashboard.webhook_last_success: for a webhook that never succeeded (a dead endpoint) that look
// went through every delivery it had, 30 days of its events, for every webhook of every page of
// the list, as often as a secret key asked. It now looks through the webhook's latest
// LEGACY_SUCCESS_LOOKBACK deliveries. Counted from the table's statistics
// (test/support/table-reads.ts), so the test does not depend on time.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LEGACY_SUCCESS_LOOKBACK, webhooksStatsStatement } from "../src/delivery/charts.ts";
import { newId } from "../src/ids.ts";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";
import { storedEvents, storedWebhook } from "./support/stored-log.ts";
import { withTableReads } from "./support/table-reads.ts";

const FAILED = 4 * LEGACY_SUCCESS_LOOKBACK;

describe.each(backends)("a webhook's stats, on %s", (backend) => {
  let db: TestDatabase;
  const projectId = newId("prj");
  const dead = newId("wh");
  const recovered = newId("wh");
  const healthy = newId("wh");

  /** `n` deliveries of `webhookId`, days old (outside the stats' 24 hours), the newest `succeeded` ones last. */
  async function seed(webhookId: string, n: number, succeeded: number) {
    await storedEvents(db, projectId, webhookId, n);
    await db.prisma.$executeRaw`
      INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type, status, attempts, created_at, completed_at)
      SELECT ${webhookId} || '_d' || k, ${webhookId} || '_e' || k, ${webhookId}, ${projectId}, 'user.updated',
             CASE WHEN k > ${n - succeeded}::int THEN 'succeeded' ELSE 'failed' END::delivery_status, 1,
             now() - interval '3 days' + k * interval '1 second', now() - interval '3 days' + k * interval '1 second'
      FROM generate_series(1, ${n}::int) k`;
  }

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    await db.prisma.project.create({ data: { id: projectId, name: "stats" } });
    for (const id of [dead, recovered, healthy]) {
      await storedWebhook(db, projectId, id);
    }
    // every delivery of the dead endpoint failed; the other one's latest succeeded, recorded
    // before dashboard.webhook_last_success kept successes (no row there)
    await seed(dead, FAILED, 0);
    await seed(recovered, 10, 1);
    await seed(healthy, 2 * LEGACY_SUCCESS_LOOKBACK, LEGACY_SUCCESS_LOOKBACK);
    await db.prisma.$executeRaw`ANALYZE deliveries`;
  });
  afterAll(async () => {
    await db?.close();
  });

  it("reads at most the latest deliveries of a webhook that never succeeded, not its whole log", async () => {
    const { result, reads } = await withTableReads(db, "deliveries", (tx) =>
      tx.$queryRaw<{ id: string; last_ok: Date | null }[]>(webhooksStatsStatement(projectId, [dead])),
    );
    expect(result).toEqual([expect.objectContaining({ id: dead, last_ok: null })]);
    expect(reads.seq_scan).toBe(0);
    expect(reads.rows_read).toBeLessThanOrEqual(LEGACY_SUCCESS_LOOKBACK + 10);
  });

  it("still finds a success recorded before webhook_last_success among the webhook's latest deliveries", async () => {
    const rows = await db.prisma.$queryRaw<{ id: string; last_ok: Date | null }[]>(webhooksStatsStatement(projectId, [recovered]));
    const newest = await db.prisma.delivery.findFirstOrThrow({ where: { webhookId: recovered, status: "succeeded" } });
    expect(rows[0].last_ok?.getTime()).toBe(newest.completedAt!.getTime());
  });

  it("reads a webhook that succeeds only as far as its latest success", async () => {
    const { result, reads } = await withTableReads(db, "deliveries", (tx) =>
      tx.$queryRaw<{ id: string; last_ok: Date | null }[]>(webhooksStatsStatement(projectId, [healthy])),
    );
    const newest = await db.prisma.delivery.findFirstOrThrow({ where: { webhookId: healthy }, orderBy: { createdAt: "desc" } });
    expect(result).toEqual([expect.objectContaining({ id: healthy, last_ok: newest.completedAt })]);
    expect(reads.rows_read).toBeLessThanOrEqual(10);
  });
});
