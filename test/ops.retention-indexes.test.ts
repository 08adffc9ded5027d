// The retention sweep runs every minute on every deployment, and most runs find nothing to
// remove. Each table's pick must then read an index, not the table: sessions and notices were
// read whole (1,000,000 live sessions: 100 ms a minute). Checked on the plan Postgres chooses for
// the sweep's own statements, in a project with thousands of rows that stay, after ANALYZE (as
// autovacuum leaves a table); no timing involved.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Prisma } from "../src/generated/prisma/client.ts";
import { stalledDeliveriesPick, sweepOnce, sweepPicks } from "../src/retention/sweep.ts";
import { newId } from "../src/ids.ts";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";
import { planNodes } from "./support/plans.ts";
import { seedPopulation } from "./support/population.ts";

const SETTINGS = { eventsDays: 30, deliveryLogDays: 7 };
const USERS = 3_000;


describe.each(backends)("the retention sweep's reads, on %s", (backend) => {
  let db: TestDatabase;
  const projectId = newId("prj");

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    await db.prisma.project.create({ data: { id: projectId, name: "retention" } });
    await seedPopulation(db, projectId, USERS);
    // every user signed in twice this week: live sessions, and sessions ended a day ago that the
    // sweep has long removed (none left to find)
    await db.prisma.$executeRaw`
      INSERT INTO sessions (id, project_id, account_id, created_at, expires_at, ended_at)
      SELECT 'ses_live' || n, ${projectId}, 'acc_pop' || n, now() - interval '1 day', now() + interval '29 days', NULL
      FROM generate_series(1, ${USERS}::int) n`;
    // notices sent this week, and a few waiting
    await db.prisma.$executeRaw`
      INSERT INTO notices (id, project_id, kind, value, subject, text, status, created_at, sent_at)
      SELECT 'ntc_' || n, ${projectId}, 'email', 'pop' || n || '@example.com', 'A change to your account', 'text',
             CASE WHEN n % 100 = 0 THEN 'pending' ELSE 'sent' END::notice_status, now() - interval '2 days', now() - interval '2 days'
      FROM generate_series(1, ${USERS}::int) n`;
    // this week's events, each delivered to one webhook
    await db.prisma.$executeRaw`
      INSERT INTO webhooks (id, project_id, url, secret_sealed) VALUES ('wh_pop', ${projectId}, 'https://example.com/hook', 'sealed')`;
    await db.prisma.$executeRaw`
      INSERT INTO outbox_events (id, project_id, event_type, body, created_at)
      SELECT 'evt_pop' || n, ${projectId}, 'user.updated', '{}', now() - interval '3 days'
      FROM generate_series(1, ${USERS}::int) n`;
    await db.prisma.$executeRaw`
      INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type, status, attempts, created_at, completed_at)
      SELECT 'dlv_pop' || n, 'evt_pop' || n, 'wh_pop', ${projectId}, 'user.updated', 'succeeded', 1, now() - interval '3 days', now() - interval '3 days'
      FROM generate_series(1, ${USERS}::int) n`;
    for (const table of ["sessions", "notices", "outbox_events", "deliveries"]) await db.prisma.$executeRawUnsafe(`ANALYZE ${table}`);
  });
  afterAll(async () => {
    await db?.close();
  });

  const plan = (pick: Prisma.Sql) => planNodes(db, pick.text, pick.values);

  it.each(["sessions", "notices"])("finds %s to remove through an index, not by reading the table", async (table) => {
    const { pick } = sweepPicks(SETTINGS).find((p) => p.table === table)!;
    const read = (await plan(pick)).filter((n) => n["Relation Name"] === table);
    expect(read.map((n) => n["Node Type"])).not.toContain("Seq Scan");
    expect(read.length).toBeGreaterThan(0);
  });

  it("finds deliveries still pending at the events' retention from the old end of the events, not by reading either table", async () => {
    const nodes = await plan(stalledDeliveriesPick(SETTINGS));
    for (const table of ["outbox_events", "deliveries"]) {
      const read = nodes.filter((n) => n["Relation Name"] === table);
      expect(read.map((n) => n["Node Type"])).not.toContain("Seq Scan");
    }
    expect(nodes.filter((n) => n["Relation Name"] === "outbox_events").length).toBeGreaterThan(0);
  });

  it("still removes what it should: a session ended or expired over a minute ago, a notice settled before the retention", async () => {
    await db.prisma.$executeRaw`
      INSERT INTO sessions (id, project_id, account_id, created_at, expires_at, ended_at) VALUES
        ('ses_ended', ${projectId}, 'acc_pop1', now() - interval '2 days', now() + interval '28 days', now() - interval '2 minutes'),
        ('ses_expired', ${projectId}, 'acc_pop2', now() - interval '31 days', now() - interval '2 minutes', NULL),
        ('ses_just_ended', ${projectId}, 'acc_pop3', now() - interval '2 days', now() + interval '28 days', now())`;
    await db.prisma.$executeRaw`
      INSERT INTO notices (id, project_id, kind, value, subject, text, status, created_at) VALUES
        ('ntc_old_sent', ${projectId}, 'email', 'a@example.com', 's', 't', 'sent', now() - interval '31 days'),
        ('ntc_old_failed', ${projectId}, 'email', 'b@example.com', 's', 't', 'failed', now() - interval '31 days'),
        ('ntc_old_pending', ${projectId}, 'email', 'c@example.com', 's', 't', 'pending', now() - interval '31 days')`;
    const report = await sweepOnce(db, SETTINGS);
    expect(report.deleted).toMatchObject({ sessions: 2, notices: 2 });
    const sessions = await db.prisma.session.findMany({ where: { id: { in: ["ses_ended", "ses_expired", "ses_just_ended"] } }, select: { id: true } });
    expect(sessions.map((s) => s.id)).toEqual(["ses_just_ended"]);
    const notices = await db.prisma.notice.findMany({ where: { id: { startsWith: "ntc_old" } }, select: { id: true } });
    expect(notices.map((n) => n.id)).toEqual(["ntc_old_pending"]);
    expect(await db.prisma.session.count()).toBe(USERS + 1);
  });
});
