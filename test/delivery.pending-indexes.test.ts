// The partial indexes of pending deliveries are read like a queue: every claim starts at the head
// of each webhook's range, where the rows just delivered were. A scan marks an index entry whose
// row is gone so that the next scan steps over it without reading the table; that must hold for a
// burst too (a webhook's deliveries enqueued in one transaction share their key), which
// deduplicated entries of equal keys defeated (src/delivery/sql.ts, claimStatement).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimDue, recordResults } from "../src/delivery/sql.ts";
import { newId } from "../src/ids.ts";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";
import { planNodes } from "./support/plans.ts";
import { bulkEnqueue, newMasterKey, seedWebhook } from "./support/receiver.ts";

const masterKey = newMasterKey();
const BURST = 1_000;
/** A drain under way: the head of the burst delivered, the rest pending. */
const DELIVERED = 100;

describe.each(backends)("the pending deliveries' indexes on %s", (backend) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await openTestDatabase(backend);
  });
  afterAll(async () => {
    await db?.close();
  });

  /**
   * The head of a webhook's due range, as a claim reads it (claimStatement, src/delivery/sql.ts):
   * the first pending delivery. Returns the rows of the table the scan visited (an index-only
   * scan visits a row only on a page changed since the last vacuum) and the index it read.
   */
  async function headProbe(webhookId: string): Promise<{ heapFetches: number; indexes: string[] }> {
    const plan = await planNodes(
      db,
      `SELECT webhook_id, next_attempt_at FROM deliveries
       WHERE webhook_id = $1 AND status = 'pending' ORDER BY next_attempt_at LIMIT 1`,
      [webhookId],
      { analyze: true },
    );
    const scans = plan.filter((n) => n["Node Type"] === "Index Only Scan");
    return { heapFetches: scans.reduce((sum, n) => sum + (n["Heap Fetches"] ?? 0), 0), indexes: scans.map((n) => n["Index Name"] ?? "") };
  }

  /**
   * Waits until no transaction that began before now is still running anywhere on the server.
   * A scan marks an entry only when its row is dead to every snapshot, and Postgres' quick test
   * for that compares the deleting transaction with the oldest one still running in any
   * database: while another test file's transaction (a CREATE DATABASE, say) that began before
   * the results were recorded runs, no entry is marked. That is the precondition of the
   * behaviour under test, so the test waits for it rather than measuring before it holds.
   */
  async function olderTransactionsEnded(): Promise<void> {
    const [{ now }] = await db.prisma.$queryRawUnsafe<Array<{ now: string }>>("SELECT pg_current_xact_id()::text AS now");
    for (let polls = 0; polls < 3_000; polls++) {
      const [{ ended }] = await db.prisma.$queryRawUnsafe<Array<{ ended: boolean }>>(
        "SELECT pg_snapshot_xmin(pg_current_snapshot()) > $1::text::xid8 AS ended",
        now,
      );
      if (ended) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`a transaction older than ${now} still runs on the server after 30 s`);
  }

  it("rows delivered from the head of a burst are read past by one claim, not by every claim after it", async () => {
    const hook = await seedWebhook(db, masterKey, { url: "http://127.0.0.1:9/hook" });
    await bulkEnqueue(db, hook.projectId, BURST); // one statement: every delivery has the same created_at and due time
    await db.prisma.$executeRawUnsafe("VACUUM ANALYZE deliveries"); // as autovacuum leaves a backlog that waited

    const claimed = await claimDue(db, { workerId: "w1", limit: DELIVERED, leaseMs: 30_000, perWebhookCap: BURST });
    expect(claimed).toHaveLength(DELIVERED);
    const recorded = await recordResults(
      db,
      "w1",
      claimed.map((c) => ({
        deliveryId: c.deliveryId, attemptId: newId("att"), attempt: c.attempt, status: "succeeded" as const, delayMs: null, statusCode: 200,
        error: null, startedAt: new Date(), durationMs: 5, responseExcerpt: null, signedWith: null,
      })),
    );
    expect(recorded).toHaveLength(DELIVERED);
    await olderTransactionsEnded();

    const first = await headProbe(hook.webhookId);
    expect(first.indexes).toEqual(["deliveries_webhook_due_idx"]);
    const second = await headProbe(hook.webhookId);
    const third = await headProbe(hook.webhookId);
    // The first scan reads past the delivered rows at the head and marks their entries; the
    // next ones step over those entries and visit only the first pending row. With equal keys
    // deduplicated into one entry that still holds pending rows, every scan visited every
    // delivered row of it again.
    expect(first.heapFetches).toBeGreaterThan(DELIVERED);
    expect(second.heapFetches).toBeLessThanOrEqual(2);
    expect(third.heapFetches).toBeLessThanOrEqual(2);
  });
});
