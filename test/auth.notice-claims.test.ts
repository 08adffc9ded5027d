// The notice sender's claim under a backlog (src/auth/notices.ts): a claim looks through a
// bounded window of the oldest due notices, takes whole destinations from it, and locks a row
// only if it is still the version it read. So senders in several processes draining a backlog
// larger than the window send every notice exactly once. (That a destination's notices due
// together go out as one message is security.message-budgets' test, with one sender: two senders
// claiming at the same moment may each take part of a destination.)
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { startNoticeSender } from "../src/auth/notices.ts";
import { loadConfig } from "../src/config.ts";
import { createLogger } from "../src/log.ts";
import type { Message, Messenger } from "../src/messaging/transport.ts";
import { backends, openTestDatabase, serverUrl, type TestDatabase } from "./support/db.ts";
import { until } from "./support/receiver.ts";

/** More than a claim looks through (1,000), so the senders work through the window. */
const DESTINATIONS = 1_500;
const BUSY = "busy@example.com";
const BUSY_NOTICES = 40;

const plenty = { max: 1_000_000, windowSeconds: 3600 };
const limits = { noticesPerDestination: plenty, noticesPerAccount: plenty, smsPerProject: plenty, emailsPerProject: plenty };

function capture(): Messenger & { sent: Message[] } {
  const sent: Message[] = [];
  return { sent, send: async (m) => void sent.push(m), check: async () => null, close() {} };
}

describe.each(backends)("notice claims on %s", (backend) => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    await db.prisma.$executeRawUnsafe(`INSERT INTO projects (id, name) VALUES ('prj_claims', 'claims')`);
  });
  afterAll(() => db?.close());

  it("two senders drain a backlog larger than a claim's window: every notice sent exactly once", async () => {
    // a backlog far larger than one claim's window, all due, one destination with many notices among them
    await db.prisma.$executeRawUnsafe(`
      INSERT INTO notices (id, project_id, kind, value, subject, text, next_attempt_at, created_at)
      SELECT 'ntc_one' || n, 'prj_claims', 'email', 'user' || n || '@example.com', 'Subject ' || n, 'Subject ' || n || E'\\nchange ' || n,
             now() AT TIME ZONE 'UTC' - make_interval(secs => ${DESTINATIONS} - n + 60), now() AT TIME ZONE 'UTC'
      FROM generate_series(1, ${DESTINATIONS}) n`);
    await db.prisma.$executeRawUnsafe(`
      INSERT INTO notices (id, project_id, kind, value, subject, text, next_attempt_at, created_at)
      SELECT 'ntc_busy' || n, 'prj_claims', 'email', '${BUSY}', 'A passkey was added', E'A passkey was added\\nchange ' || n,
             now() AT TIME ZONE 'UTC' - interval '1 second', now() AT TIME ZONE 'UTC'
      FROM generate_series(1, ${BUSY_NOTICES}) n`);

    const messengers = [capture(), capture()];
    const logger = createLogger("silent");
    const senders = messengers.map((messenger) => startNoticeSender({ db, messenger, logger, limits, scheduleMs: loadConfig({}).noticeRetryScheduleMs, pollMs: 50 }));
    try {
      const pending = () => db.prisma.notice.count({ where: { status: { not: "sent" } } });
      await until(pending, (n) => n === 0);
    } finally {
      await Promise.all(senders.map((s) => s.stop()));
    }

    const sent = messengers.flatMap((m) => m.sent);
    const byDestination = new Map<string, Message[]>();
    for (const m of sent) byDestination.set(m.to.value, [...(byDestination.get(m.to.value) ?? []), m]);
    for (let n = 1; n <= DESTINATIONS; n++) {
      const got = byDestination.get(`user${n}@example.com`) ?? [];
      expect(got.map((m) => m.text), `user${n}`).toEqual([`Subject ${n}\nchange ${n}`]);
    }
    // a gathered message says how many changes it holds
    const changes = (m: Message) => Number(/^(\d+) changes were made/.exec(m.text)?.[1] ?? 1);
    const busy = byDestination.get(BUSY) ?? [];
    expect(busy.reduce((sum, m) => sum + changes(m), 0)).toBe(BUSY_NOTICES);
    expect(byDestination.size).toBe(DESTINATIONS + 1);
  });
});

// A notice that failed waits its retry delay by the database's clock, which claims it
// (docs/operations.md, "Clocks"). The delay used to be added to the sending gateway's clock: one
// running 2 minutes behind wrote a retry due 90 s in the database's past, so a failing transport
// was tried again at once instead of 30 s later. The gateway's clock is moved with vitest's fake
// Date, which needs a database with a clock of its own (PGlite reads the process's Date).
describe.skipIf(!serverUrl)("a notice's retry on a gateway whose clock is behind the database's (postgres)", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await openTestDatabase("postgres");
    await db.prisma.$executeRawUnsafe(`INSERT INTO projects (id, name) VALUES ('prj_retry', 'retry')`);
  });
  afterAll(() => db?.close());
  afterEach(() => {
    vi.useRealTimers();
  });

  it("is due its first delay after the failure, by the database's clock", async () => {
    await db.prisma.$executeRawUnsafe(`
      INSERT INTO notices (id, project_id, kind, value, subject, text, next_attempt_at, created_at)
      VALUES ('ntc_retry', 'prj_retry', 'email', 'late@example.com', 'A passkey was added', 'A passkey was added',
              now() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC')`);
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true });
    vi.setSystemTime(new Date(Date.now() - 2 * 60_000));
    const failing: Messenger = { send: async () => Promise.reject(new Error("smtp: 451 try again later")), check: async () => null, close() {} };
    const sender = startNoticeSender({ db, messenger: failing, logger: createLogger("silent"), limits, scheduleMs: [30_000, 120_000], pollMs: 50 });
    try {
      await until(() => db.prisma.notice.findUniqueOrThrow({ where: { id: "ntc_retry" } }), (n) => n.lastError !== null);
    } finally {
      await sender.stop();
    }
    const [{ due_in_ms }] = await db.prisma.$queryRaw<{ due_in_ms: number }[]>`
      SELECT (extract(epoch FROM next_attempt_at - now() AT TIME ZONE 'UTC') * 1000)::float8 AS due_in_ms FROM notices WHERE id = 'ntc_retry'`;
    expect(due_in_ms).toBeGreaterThan(25_000);
    expect(due_in_ms).toBeLessThanOrEqual(30_000);
  });
});
