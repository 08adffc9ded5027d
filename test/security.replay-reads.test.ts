// A replay of a webhook's failed deliveries (replayFailedWebhookDeliveries, `linkgate deliveries
// replay`) reads its failed deliveries, not its log. It used to walk every delivery of the
// webhook since the given time to find the few that failed: 85 to 200 ms a call on Postgres
// with 300,000 delivered, 30 of them in one GraphQL request, as often as a secret key asked, and
// every call after the first had nothing to replay. Counted from the table's statistics
// (test/support/table-reads.ts), so the test does not depend on time.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KeyActor } from "../src/deps.ts";
import { countReplayable, replayFailed } from "../src/delivery/redelivery.ts";
import { newId } from "../src/ids.ts";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";
import { storedProject, storedWebhook } from "./support/stored-log.ts";
import { withTableReads } from "./support/table-reads.ts";

const DELIVERED = 3_000;
const FAILED = 5;
const EPOCH = new Date(0);

describe.each(backends)("replaying a webhook's failed deliveries, on %s", (backend) => {
  let db: TestDatabase;
  let owner: KeyActor;
  const projectId = newId("prj");
  const webhookId = newId("wh");

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    owner = await storedProject(db, projectId, "replays");
    await storedWebhook(db, projectId, webhookId);
    // A day of a busy webhook's log: thousands delivered, a few failed, all since the replay's time.
    await db.prisma.$executeRaw`
      INSERT INTO outbox_events (id, project_id, event_type, body, created_at)
      SELECT 'evt_r' || n, ${projectId}, 'user.updated', '{}', now() - interval '1 day' + n * interval '1 second'
      FROM generate_series(1, ${DELIVERED + FAILED}::int) n`;
    await db.prisma.$executeRaw`
      INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type, status, attempts, created_at, completed_at)
      SELECT 'dlv_r' || n, 'evt_r' || n, ${webhookId}, ${projectId}, 'user.updated',
             CASE WHEN n % ${DELIVERED / FAILED + 1}::int = 0 THEN 'failed' ELSE 'succeeded' END::delivery_status,
             1, now() - interval '1 day' + n * interval '1 second', now() - interval '1 day' + n * interval '1 second'
      FROM generate_series(1, ${DELIVERED + FAILED}::int) n`;
    await db.prisma.$executeRaw`ANALYZE deliveries`;
  });
  afterAll(async () => {
    await db?.close();
  });

  /** What `call` returns, and what it read from the deliveries table. */
  const withReads = <T>(call: (tx: TestDatabase) => Promise<T>) => withTableReads(db, "deliveries", (tx) => call({ ...db, prisma: tx } as unknown as TestDatabase));

  it("counts what a replay would send by reading the failed deliveries alone", async () => {
    const { result, reads } = await withReads((tx) => countReplayable(tx, { projectId, webhookId, since: EPOCH }));
    expect(result).toBe(FAILED);
    expect(reads.seq_scan).toBe(0);
    expect(reads.rows_read).toBeLessThanOrEqual(2 * FAILED);
  });

  it("replays the failed deliveries among thousands delivered, reading those it replays", async () => {
    const { result, reads } = await withReads((tx) => replayFailed(tx, owner, webhookId, EPOCH));
    expect(result).toBe(FAILED);
    expect(reads.seq_scan).toBe(0);
    // each failed delivery found, then updated: nothing of the delivered ones
    expect(reads.rows_read).toBeLessThanOrEqual(3 * FAILED);
    expect(await db.prisma.delivery.count({ where: { webhookId, status: "pending" } })).toBe(FAILED);
  });

  it("a replay with nothing left to replay reads next to nothing, however often it is asked", async () => {
    for (let i = 0; i < 3; i++) {
      const { result, reads } = await withReads((tx) => replayFailed(tx, owner, webhookId, EPOCH));
      expect(result).toBe(0);
      expect(reads.seq_scan).toBe(0);
      expect(reads.rows_read).toBeLessThanOrEqual(2);
    }
  });
});
