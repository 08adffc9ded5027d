// Retention (issue 15): expired rows go, settled history goes after its retention, and a
// delivery still pending is never removed. Rows are made by real flows, then aged by moving
// their timestamps into the past, as a month of traffic would leave them.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { metrics } from "../src/metrics.ts";
import { SWEPT_TABLES, sweepOnce } from "../src/retention/sweep.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

const SETTINGS = { eventsDays: 30, deliveryLogDays: 7 };

/** This process's metric values by table (tests read differences: several apps share the registry). */
async function deletedSoFar(): Promise<Record<string, number>> {
  const { values } = await metrics.registry.getSingleMetric("linkgate_retention_rows_deleted_total")!.get();
  return Object.fromEntries(values.map((v) => [String(v.labels.table), v.value]));
}

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

    const before = await deletedSoFar();
    const sweptAt = Date.now() / 1000;
    const report = await sweepOnce(h.db, SETTINGS);
    expect(report.swept).toBe(true);
    // progress in the metrics: rows deleted per table, and when this process last swept
    const after = await deletedSoFar();
    for (const table of SWEPT_TABLES) expect(after[table] - before[table], table).toBe(report.deleted[table] ?? 0);
    expect(report.deleted.sessions).toBeGreaterThan(0);
    const { values } = await metrics.registry.getSingleMetric("linkgate_retention_last_sweep_timestamp_seconds")!.get();
    expect(values[0].value).toBeGreaterThanOrEqual(Math.floor(sweptAt));
    expect(await h.db.prisma.otpState.findMany({ select: { value: true } })).toEqual([{ value: "pending-code@example.com" }]);
    expect(await h.db.prisma.webauthnChallenge.count()).toBe(0);
    expect((await h.db.prisma.rateLimit.findMany({ select: { key: true } })).map((r) => r.key)).toEqual(["send:ida:current"]);
    const sessions = await h.db.prisma.session.findMany({ select: { accountId: true } });
    expect(sessions.map((s) => s.accountId)).toEqual([live.accountId]);
    expect((await h.call("GET", "/oauth/userinfo", { headers: { authorization: `Bearer ${live.token}` } })).status).toBe(200);
    expect((await h.call("GET", "/oauth/userinfo", { headers: { authorization: `Bearer ${old.token}` } })).status).toBe(401);
  });

  it("sweeps the OpenID Connect provider's expired codes and tokens, and keeps live ones and those without an expiry", async () => {
    const row = (id: string, expires: string | null) =>
      sql(
        `INSERT INTO oidc_payloads (id, kind, payload, expires_at) VALUES ($1, 'RefreshToken', '{}'::jsonb, ${expires ?? "NULL"})`,
        id,
      );
    await row("expired-refresh-token", "now() - interval '5 minutes'");
    await row("live-refresh-token", "now() + interval '1 day'");
    await row("grant-without-expiry", null);
    const report = await sweepOnce(h.db, SETTINGS);
    expect(report.deleted.oidc_payloads).toBe(1);
    const kept = await h.db.prisma.oidcPayload.findMany({ select: { id: true }, orderBy: { id: "asc" } });
    expect(kept.map((r) => r.id)).toEqual(["grant-without-expiry", "live-refresh-token"]);
  });

  it("sweeps external sign-in flows a minute after they expire, and keeps live ones", async () => {
    const provider = await h.db.prisma.identityProvider.create({
      data: { id: "idp_sweep", projectId: h.projectId, slug: "sweep", preset: "oidc", displayName: "Sweep", issuer: "https://idp.example.com", clientId: "c", scopes: "openid" },
    });
    const flow = (id: string, expiresAt: Date) =>
      h.db.prisma.externalFlow.create({
        data: { id, projectId: h.projectId, providerId: provider.id, purpose: "sign_in", redirectUri: "https://app.example.com/cb", stateHash: id, nonce: "n", codeVerifier: "v", expiresAt },
      });
    await flow("xfl_expired", new Date(Date.now() - 5 * 60_000));
    await flow("xfl_live", new Date(Date.now() + 5 * 60_000));
    const report = await sweepOnce(h.db, SETTINGS);
    expect(report.deleted.external_flows).toBe(1);
    expect((await h.db.prisma.externalFlow.findMany({ select: { id: true } })).map((r) => r.id)).toEqual(["xfl_live"]);
  });

  it("drops events (with their deliveries) after their retention, and attempts after the log's", async () => {
    const hook = await h.gql(`mutation { createWebhook(input: { url: "http://127.0.0.1:9/hook", events: ["user.created"] }) { ... on CreateWebhookPayload { webhook { id } } } }`);
    const webhookId = hook.body.data.createWebhook.webhook.id;
    for (const who of ["settled", "stuck", "held", "recent"]) await h.signIn({ email: `${who}@example.com` });
    const eventOf = async (email: string) =>
      (await h.db.prisma.outboxEvent.findFirstOrThrow({ where: { eventType: "user.created", body: { contains: email } } })).id;
    const [settled, stuck, held, recent] = await Promise.all(["settled", "stuck", "held", "recent"].map((who) => eventOf(`${who}@example.com`)));
    const deliveryOf = async (eventId: string) => (await h.db.prisma.delivery.findFirstOrThrow({ where: { eventId, webhookId } })).id;
    // the project turned its webhook off a while ago: its pending deliveries wait for it
    const off = await h.gql(`mutation($id: ID!) { updateWebhook(id: $id, input: { enabled: false }) { __typename } }`, { id: webhookId });
    expect(off.body.data.updateWebhook.__typename).toBe("UpdateWebhookPayload");

    // 40 days ago: one event delivered long since; two whose deliveries still wait, one of
    // them in a worker's hands right now; 10 days ago, one whose delivery waits too
    await sql(`UPDATE outbox_events SET created_at = now() - interval '40 days' WHERE id IN ($1, $2, $3)`, settled, stuck, held);
    await sql(`UPDATE outbox_events SET created_at = now() - interval '10 days' WHERE id = $1`, recent);
    await sql(`UPDATE deliveries SET status = 'succeeded', completed_at = now() - interval '40 days' WHERE event_id = $1`, settled);
    await sql(`UPDATE deliveries SET lease_until = now() + interval '1 minute', leased_by = 'a-worker' WHERE event_id = $1`, held);
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
    // the stuck delivery would never be sent: it ends (failed, expired) and its event goes with
    // the settled one; the one a worker holds keeps its event until its result is recorded
    expect(report).toMatchObject({ expired: 1, deleted: { outbox_events: 2 } });
    const events = (await h.db.prisma.outboxEvent.findMany({ where: { id: { in: [settled, stuck, held, recent] } }, select: { id: true } })).map((e) => e.id);
    expect(events.sort()).toEqual([held, recent].sort());
    expect(await h.db.prisma.delivery.count({ where: { eventId: { in: [settled, stuck] } } })).toBe(0);
    const waiting = await h.db.prisma.delivery.findMany({ where: { eventId: { in: [held, recent] } }, select: { eventId: true, status: true } });
    expect(waiting.map((d) => d.status)).toEqual(["pending", "pending"]);
    const attempts = await h.db.prisma.deliveryAttempt.findMany({ select: { id: true } });
    expect(attempts.map((a) => a.id)).toEqual([`att_${recent}_1day`]);

    // once the worker lets go (its lease runs out), the next run ends that one too
    await sql(`UPDATE deliveries SET lease_until = now() - interval '1 second' WHERE event_id = $1`, held);
    expect(await sweepOnce(h.db, SETTINGS)).toMatchObject({ expired: 1, deleted: { outbox_events: 1 } });
    expect(await h.db.prisma.outboxEvent.count({ where: { id: held } })).toBe(0);

    // on a webhook that is on, a delivery due now (redelivered near the edge, say) is left to be
    // sent; one due for over an hour that nobody sends (its breaker held open) ends
    const on = await h.gql(`mutation($id: ID!) { updateWebhook(id: $id, input: { enabled: true }) { __typename } }`, { id: webhookId });
    expect(on.body.data.updateWebhook.__typename).toBe("UpdateWebhookPayload");
    await sql(`UPDATE outbox_events SET created_at = now() - interval '40 days' WHERE id = $1`, recent);
    await sql(`UPDATE deliveries SET next_attempt_at = now() WHERE event_id = $1`, recent);
    expect(await sweepOnce(h.db, SETTINGS)).toMatchObject({ expired: 0 });
    expect(await h.db.prisma.delivery.findFirst({ where: { eventId: recent }, select: { status: true } })).toEqual({ status: "pending" });
    await sql(`UPDATE deliveries SET next_attempt_at = now() - interval '2 hours' WHERE event_id = $1`, recent);
    expect(await sweepOnce(h.db, SETTINGS)).toMatchObject({ expired: 1, deleted: { outbox_events: 1 } });
  });

  const PULL = `query($after: String) { events(after: $after, first: 100) {
    __typename ... on Error { message } ... on EventPage { endCursor hasMore events { body cursor } } } }`;
  const pull = async (after?: string | null) => (await h.gql(PULL, { after })).body.data.events;
  /** A user's events become 40 days old, their deliveries long since settled. */
  const age = async (email: string) => {
    await sql(`UPDATE outbox_events SET created_at = now() - interval '40 days' WHERE body LIKE $1`, `%${email}%`);
    await sql(
      `UPDATE deliveries SET status = 'succeeded', completed_at = now() - interval '40 days'
       WHERE event_id IN (SELECT id FROM outbox_events WHERE body LIKE $1)`,
      `%${email}%`,
    );
  };
  const lastCursorOf = (page: { events: { body: string; cursor: string }[] }, email: string) =>
    page.events.filter((e) => e.body.includes(email)).at(-1)!.cursor;

  // The events pull reaches back as far as the events' retention: a reader whose cursor has
  // events after it removed is told so (CursorExpired), never handed a page with a silent gap,
  // while a quiet project's reader whose own last event aged out carries on.
  it("refuses a cursor with events after it removed, serves one at the edge, and starts from the oldest event kept", async () => {
    for (const who of ["first", "second", "third"]) await h.signIn({ email: `${who}@example.com` });
    const all = await pull();
    expect(all.__typename).toBe("EventPage");
    const [first, second] = [lastCursorOf(all, "first@example.com"), lastCursorOf(all, "second@example.com")];

    await age("first@example.com");
    await age("second@example.com");
    expect((await sweepOnce(h.db, h.config.retention)).deleted.outbox_events).toBeGreaterThan(0);

    const expired = await pull(first);
    expect(expired.__typename).toBe("CursorExpired");
    expect(expired.message).toContain(`(${h.config.retention.eventsDays} days)`);
    expect((await pull(all.events[0].cursor)).__typename).toBe("CursorExpired");

    // nothing after the second user's last event was removed: the reader carries on
    const atEdge = await pull(second);
    expect(atEdge.__typename).toBe("EventPage");
    expect(atEdge.events.length).toBeGreaterThan(0);
    expect(atEdge.events.every((e: { body: string }) => e.body.includes("third@example.com"))).toBe(true);
    const oldestKept = (await pull()).events.map((e: { body: string }) => e.body).join("\n");
    expect(oldestKept).not.toContain("first@example.com");
    expect(oldestKept).not.toContain("second@example.com");
    expect(oldestKept).toContain("third@example.com");
  });

  it("a quiet project's reader whose last event aged out carries on, and sees what comes next", async () => {
    const caughtUp = (await pull()).endCursor;
    await age("third@example.com");
    await sweepOnce(h.db, h.config.retention);
    expect(JSON.stringify((await pull()).events)).not.toContain("third@example.com");

    const quiet = await pull(caughtUp);
    expect(quiet).toMatchObject({ __typename: "EventPage", events: [], hasMore: false, endCursor: caughtUp });
    await h.signIn({ email: "fourth@example.com" });
    const next = await pull(caughtUp);
    expect(next.events.length).toBeGreaterThan(0);
    expect(next.events.every((e: { body: string }) => e.body.includes("fourth@example.com"))).toBe(true);
  });

  it("another project's retention does not expire this project's cursors", async () => {
    const mine = (await pull()).endCursor;
    await h.db.prisma.$executeRawUnsafe(
      `INSERT INTO event_retention (project_id, swept_seq) VALUES ('prj_someone_else', 9223372036854775807)`,
    );
    expect((await pull(mine)).__typename).toBe("EventPage");
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
