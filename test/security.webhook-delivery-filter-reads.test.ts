// A page of a webhook's deliveries filtered by event type, or by status succeeded or gone (the
// dashboard's log filters), has no index of its own to read: it read the webhook's whole log when
// few or none matched, 4,000 rows for an empty `first: 1` page here, priced as one row, for
// every webhook, as often as a secret key asked. Such a page now looks through the webhook's
// newest FILTER_LOOKBACK deliveries and says so in `lookback` (docs/graphql.md, "Operation
// limits"); status pending or failed alone keeps its own index and the whole log. The whole
// GraphQL field runs in one transaction, its reads counted from the table's statistics
// (test/support/table-reads.ts), so the test does not depend on time.
import { graphql } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Deps, KeyActor } from "../src/deps.ts";
import type { GraphQLContext } from "../src/graphql/context.ts";
import { schema } from "../src/graphql/schema/index.ts";
import { FILTER_LOOKBACK } from "../src/graphql/schema/delivery.ts";
import { newId } from "../src/ids.ts";
import { keyActor } from "./support/actors.ts";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";
import { storedEvents, storedWebhook } from "./support/stored-log.ts";
import { withTableReads } from "./support/table-reads.ts";

const LOGGED = 4 * FILTER_LOOKBACK;

const PAGE = `query($id: ID!, $first: Int, $after: String, $status: DeliveryStatus, $eventType: String) {
  webhook(id: $id) {
    deliveries(first: $first, after: $after, status: $status, eventType: $eventType) {
      lookback pageInfo { hasNextPage endCursor } edges { node { id status eventType } }
    }
  }
}`;
const COUNT = `query($id: ID!, $status: DeliveryStatus, $eventType: String) {
  webhook(id: $id) { deliveries(first: 1, status: $status, eventType: $eventType) { totalCount lookback } }
}`;

describe.each(backends)("a filtered page of a webhook's deliveries, on %s", (backend) => {
  let db: TestDatabase;
  let owner: KeyActor;
  const projectId = newId("prj");
  const dead = newId("wh");
  const small = newId("wh");

  /**
   * `n` deliveries of `webhookId`, a second apart, numbered from the oldest: failed user.updated
   * ones, but for those `odd` gives another state and type.
   */
  async function seed(webhookId: string, n: number, odd: Record<number, { status: string; type: string }>) {
    const nums = Object.keys(odd).map(Number);
    const statuses = nums.map((k) => odd[k].status);
    const types = nums.map((k) => odd[k].type);
    await storedEvents(db, projectId, webhookId, n);
    await db.prisma.$executeRaw`
      INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type, status, attempts, created_at, completed_at)
      SELECT ${webhookId} || '_d' || lpad(k::text, 6, '0'), ${webhookId} || '_e' || k, ${webhookId}, ${projectId},
             coalesce((${types}::text[])[array_position(${nums}::int[], k)], 'user.updated'),
             coalesce((${statuses}::text[])[array_position(${nums}::int[], k)], 'failed')::delivery_status, 1,
             now() - interval '3 days' + k * interval '1 second', now() - interval '3 days' + k * interval '1 second'
      FROM generate_series(1, ${n}::int) k`;
  }
  const idOf = (webhookId: string, k: number) => `${webhookId}_d${String(k).padStart(6, "0")}`;

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    await db.prisma.project.create({ data: { id: projectId, name: "delivery filters" } });
    owner = await keyActor(db, projectId);
    for (const id of [dead, small]) {
      await storedWebhook(db, projectId, id);
    }
    // A dead endpoint's log: every delivery failed, but for a success, a 410 and a user.created
    // among its oldest (outside the lookback), and a success just inside it.
    await seed(dead, LOGGED, {
      1: { status: "succeeded", type: "user.created" },
      2: { status: "gone", type: "user.updated" },
      [LOGGED - FILTER_LOOKBACK + 1]: { status: "succeeded", type: "user.updated" },
    });
    // A webhook with fewer deliveries than the lookback: its filters see them all.
    await seed(small, 10, { 1: { status: "succeeded", type: "user.created" }, 2: { status: "gone", type: "user.updated" } });
    await db.prisma.$executeRaw`ANALYZE deliveries`;
  });
  afterAll(async () => {
    await db?.close();
  });

  /** The GraphQL answer to `source`, run with the project's secret key in one transaction, and what it read of deliveries. */
  async function ask(source: string, variableValues: Record<string, unknown>) {
    const { result, reads } = await withTableReads(db, "deliveries", (tx) => {
      const contextValue: GraphQLContext = {
        deps: { prisma: tx, db: { prisma: tx } } as unknown as Deps,
        project: async () => owner,
        secret: async () => owner,
        user: () => Promise.reject(new Error("no user")),
        admin: false,
        afresh: () => {},
      };
      return graphql({ schema, source, variableValues, contextValue });
    });
    expect(result.errors).toBeUndefined();
    return { deliveries: (result.data as any).webhook.deliveries, reads };
  }

  it.each([
    { status: "succeeded" },
    { status: "gone" },
    { eventType: "user.created" },
    { status: "failed", eventType: "user.created" },
    { status: "pending", eventType: "user.updated" },
  ])("looks through the webhook's newest deliveries only, not its whole log, for %o", async (filters) => {
    const { deliveries, reads } = await ask(PAGE, { id: dead, first: 1, ...filters });
    expect(reads.seq_scan).toBe(0);
    expect(reads.rows_read).toBeLessThanOrEqual(2 * FILTER_LOOKBACK + 10);
    if (filters.status === "succeeded") {
      // the success inside the lookback is found; the older one is not looked at
      expect(deliveries.edges.map((e: any) => e.node.id)).toEqual([idOf(dead, LOGGED - FILTER_LOOKBACK + 1)]);
    } else {
      expect(deliveries.edges).toEqual([]);
    }
    expect(deliveries.pageInfo.hasNextPage).toBe(false);
    expect(deliveries.lookback).toBe(FILTER_LOOKBACK);
  });

  it("counts what the filters match among those newest deliveries", async () => {
    expect((await ask(COUNT, { id: dead, status: "succeeded" })).deliveries).toEqual({ totalCount: 1, lookback: FILTER_LOOKBACK });
    expect((await ask(COUNT, { id: dead, eventType: "user.created" })).deliveries).toEqual({ totalCount: 0, lookback: FILTER_LOOKBACK });
  });

  it("reads a page filtered by status failed alone through its own index, over the whole log", async () => {
    const { deliveries, reads } = await ask(PAGE, { id: dead, first: 1, status: "failed" });
    expect(deliveries.edges.map((e: any) => e.node.id)).toEqual([idOf(dead, LOGGED)]);
    expect(deliveries.lookback).toBeNull();
    expect(reads.rows_read).toBeLessThanOrEqual(10);
    const older = await ask(PAGE, { id: dead, first: 100, status: "failed", after: deliveries.pageInfo.endCursor });
    expect(older.deliveries.edges).toHaveLength(100);
    expect(older.deliveries.lookback).toBeNull();
  });

  it("an unfiltered page covers the whole log and reads no more than it shows", async () => {
    const { deliveries, reads } = await ask(PAGE, { id: dead, first: 2 });
    expect(deliveries.edges.map((e: any) => e.node.id)).toEqual([idOf(dead, LOGGED), idOf(dead, LOGGED - 1)]);
    expect(deliveries.lookback).toBeNull();
    expect(reads.rows_read).toBeLessThanOrEqual(10);
  });

  it("a webhook with fewer deliveries than the lookback is filtered over all of them, pages after a cursor included", async () => {
    const created = await ask(PAGE, { id: small, first: 1, eventType: "user.created" });
    expect(created.deliveries.edges.map((e: any) => e.node.id)).toEqual([idOf(small, 1)]);
    expect(created.deliveries.lookback).toBeNull();
    const first = await ask(PAGE, { id: small, first: 1, eventType: "user.updated" });
    expect(first.deliveries.edges.map((e: any) => e.node.id)).toEqual([idOf(small, 10)]);
    const rest = await ask(PAGE, { id: small, first: 100, eventType: "user.updated", after: first.deliveries.pageInfo.endCursor });
    expect(rest.deliveries.edges.map((e: any) => e.node.id)).toEqual([9, 8, 7, 6, 5, 4, 3, 2].map((k) => idOf(small, k)));
    expect((await ask(PAGE, { id: small, first: 5, status: "gone" })).deliveries.edges.map((e: any) => e.node.id)).toEqual([idOf(small, 2)]);
  });

  it("pages through the filtered lookback with a cursor", async () => {
    const first = await ask(PAGE, { id: dead, first: 100, status: "failed", eventType: "user.updated" });
    expect(first.deliveries.pageInfo.hasNextPage).toBe(true);
    let seen = first.deliveries.edges.length;
    let after = first.deliveries.pageInfo.endCursor;
    for (;;) {
      const page = await ask(PAGE, { id: dead, first: 100, status: "failed", eventType: "user.updated", after });
      seen += page.deliveries.edges.length;
      if (!page.deliveries.pageInfo.hasNextPage) break;
      after = page.deliveries.pageInfo.endCursor;
    }
    // the newest FILTER_LOOKBACK deliveries, less the one success among them
    expect(seen).toBe(FILTER_LOOKBACK - 1);
  });
});
