// Retention (issue 15): expired rows go, settled history goes after its retention, and a
// delivery still pending is never removed. Rows are made by real flows, then aged by moving
// their timestamps into the past, as a month of traffic would leave them.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sweepOnce } from "../src/retention/sweep.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

const SETTINGS = { eventsDays: 30, deliveryLogDays: 7 };

describe.each(backends)("retention on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());
  const sql = (q: string, ...values: unknown[]) => h.db.prisma.$executeRawUnsafe(q, ...values);

  it("sweeps expired codes, challenges, rate-limit windows and ended sessions, and keeps live ones", async () => {
    const old = await h.signIn({ email: "old-session@example.com" });
    const live = await h.signIn({ email: "live-session@example.com" });
    await h.call("POST", "/auth/otp/start", { body: { email: "pending-code@example.com" } });
    await h.gql(`mutation { startPasskeySignIn }`);
    await h.gql(`mutation { signOut }`, {}, { authorization: `Bearer ${old.token}` });
    // time passes for everything but the live session and the newest code
    await sql(`UPDATE sessions SET ended_at = now() - interval '5 minutes' WHERE ended_at IS NOT NULL`);
    await sql(`UPDATE otp_states SET expires_at = now() - interval '5 minutes' WHERE value <> 'pending-code@example.com'`);
    await sql(`UPDATE webauthn_challenges SET expires_at = now() - interval '5 minutes'`);
    await sql(`UPDATE rate_limits SET window_start = now() - interval '2 days'`);
    await sql(`INSERT INTO rate_limits (key, window_start, window_seconds, count) VALUES ('send:ida:current', now(), 600, 1)`);

    const report = await sweepOnce(h.db, SETTINGS);
    expect(report.swept).toBe(true);
    expect(await h.db.prisma.otpState.findMany({ select: { value: true } })).toEqual([{ value: "pending-code@example.com" }]);
    expect(await h.db.prisma.webauthnChallenge.count()).toBe(0);
    expect((await h.db.prisma.rateLimit.findMany({ select: { key: true } })).map((r) => r.key)).toEqual(["send:ida:current"]);
    const sessions = await h.db.prisma.session.findMany({ select: { accountId: true } });
    expect(sessions.map((s) => s.accountId)).toEqual([live.accountId]);
    expect((await h.call("GET", "/oauth/userinfo", { headers: { authorization: `Bearer ${live.token}` } })).status).toBe(200);
    expect((await h.call("GET", "/oauth/userinfo", { headers: { authorization: `Bearer ${old.token}` } })).status).toBe(401);
  });

  it("drops events (with their deliveries) after their retention, attempts after the log's, and never a pending delivery", async () => {
    const hook = await h.gql(`mutation { createWebhook(input: { url: "http://127.0.0.1:9/hook", events: ["user.created"] }) { ... on CreateWebhookPayload { webhook { id } } } }`);
    const webhookId = hook.body.data.createWebhook.webhook.id;
    for (const who of ["settled", "stuck", "recent"]) await h.signIn({ email: `${who}@example.com` });
    const eventOf = async (email: string) =>
      (await h.db.prisma.outboxEvent.findFirstOrThrow({ where: { eventType: "user.created", body: { contains: email } } })).id;
    const [settled, stuck, recent] = [await eventOf("settled@example.com"), await eventOf("stuck@example.com"), await eventOf("recent@example.com")];
    const deliveryOf = async (eventId: string) => (await h.db.prisma.delivery.findFirstOrThrow({ where: { eventId, webhookId } })).id;

    // 40 days ago: one event delivered long since, one whose delivery is still being retried
    await sql(`UPDATE outbox_events SET created_at = now() - interval '40 days' WHERE id IN ($1, $2)`, settled, stuck);
    await sql(`UPDATE deliveries SET status = 'succeeded', completed_at = now() - interval '40 days' WHERE event_id = $1`, settled);
    await sql(`UPDATE deliveries SET status = 'succeeded', completed_at = now() WHERE event_id = $1`, recent);
    for (const [eventId, age] of [[settled, "40 days"], [recent, "10 days"], [recent, "1 day"]] as const) {
      await sql(
        `INSERT INTO delivery_attempts (id, delivery_id, attempt, started_at, duration_ms, status_code, request_headers)
         VALUES ($1, $2, 1, now() - $3::interval, 12, 200, '{}'::jsonb)`,
        `att_${eventId}_${age.replace(" ", "")}`,
        await deliveryOf(eventId),
        age,
      );
    }

    const report = await sweepOnce(h.db, SETTINGS);
    expect(report.deleted).toMatchObject({ outbox_events: 1 });
    const events = (await h.db.prisma.outboxEvent.findMany({ where: { id: { in: [settled, stuck, recent] } }, select: { id: true } })).map((e) => e.id);
    expect(events.sort()).toEqual([stuck, recent].sort());
    expect(await h.db.prisma.delivery.count({ where: { eventId: settled } })).toBe(0);
    expect(await h.db.prisma.delivery.findFirst({ where: { eventId: stuck }, select: { status: true } })).toEqual({ status: "pending" });
    const attempts = await h.db.prisma.deliveryAttempt.findMany({ select: { id: true } });
    expect(attempts.map((a) => a.id)).toEqual([`att_${recent}_1day`]);
  });

  it.runIf(backend === "postgres")("one sweeper at a time across processes: a second one skips its run", async () => {
    await h.db.prisma.$transaction(async (tx) => {
      await tx.$queryRaw`SELECT pg_advisory_xact_lock(${0x6c6b6774}) IS NULL AS held`;
      // another process is sweeping
      expect((await sweepOnce(h.db, SETTINGS)).swept).toBe(false);
    });
    expect((await sweepOnce(h.db, SETTINGS)).swept).toBe(true);
  });
});
