// The delivery log: each webhook's deliveries with every attempt, redelivery and replay, a
// project's events pulled after a cursor, and per-webhook health.
import DataLoader from "dataloader";
import { webhooksStats, type WebhookStats as Stats } from "../../delivery/charts.ts";
import { attemptRequestHeaders } from "../../delivery/attempt-headers.ts";
import { MAX_PULL_LIMIT, pullEvents } from "../../webhooks/events-pull.ts";
import { REDELIVER_ERRORS, REDELIVERIES_PER_PROJECT, redeliver, replayFailed } from "../../delivery/redelivery.ts";
import * as E from "../../errors.ts";
import { canonicalEventType } from "../../webhooks/event-types.ts";
import { builder } from "../builder.ts";
import type { GraphQLContext } from "../context.ts";
import { AGGREGATE_COST } from "../limits.ts";
import { badUserInput, boundedLast, boundedPage, DEFAULT_PAGE, MAX_PAGE } from "../pages.ts";
import { cursorHeld, pageOf } from "./connections.ts";
import { resultOf } from "./errors.ts";
import { NEEDS } from "./root.ts";
import { Webhook } from "./webhook.ts";

/**
 * The attempts a delivery shows unless asked for more: one whole schedule (attempt 1 and five
 * retries). The log itself has no bound (every redelivery starts a new cycle), so showing it all
 * made one page of deliveries an unbounded answer (docs/graphql.md, "Operation limits").
 */
const ATTEMPTS_SHOWN = 6;

const DeliveryStatus = builder.enumType("DeliveryStatus", {
  description: "Where a delivery stands.",
  values: {
    pending: { description: "waiting for its next attempt (or being sent)" },
    succeeded: { description: "the receiver answered 200, 201 or 202" },
    failed: { description: "every attempt of the schedule failed, or its webhook was disabled while it waited" },
    gone: { description: "the receiver answered 410; no more attempts" },
  },
});

const DeliveryAttempt = builder.prismaObject("DeliveryAttempt", {
  description: "One try at sending a delivery: what was sent and what came back.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "The attempt's id." }),
    attempt: t.exposeInt("attempt", {
      description: "Which attempt of its cycle it was, from 1 (the X-Service-Delivery-Attempt header); a redelivery starts again at 1.",
    }),
    startedAt: t.expose("startedAt", { type: "DateTime", description: "When it started." }),
    durationMs: t.exposeInt("durationMs", { description: "How long it took, in milliseconds, up to the answer or the failure." }),
    statusCode: t.exposeInt("statusCode", {
      nullable: true,
      description: "The HTTP status the receiver answered; null when no answer came (connection error, timeout, refused target).",
    }),
    error: t.exposeString("error", {
      nullable: true,
      description: "Why it did not succeed (the status, a connection error, a timeout, a refused target); null when it succeeded.",
    }),
    responseExcerpt: t.exposeString("responseExcerpt", {
      nullable: true,
      description: "The first 1 KiB of the response body; null when no answer came.",
    }),
    requestHeaders: t.field({
      type: "JSON",
      description:
        "The headers sent, as an object of names to values, signatures included (never the secret); empty when no request was made. Rebuilt from the body, the attempt's time and the secrets that signed it; a signature by a secret rotated out since is not shown.",
      select: { id: true },
      resolve: (a, _, ctx) => headersLoader(ctx).load(a.id),
    }),
  }),
});

const Delivery = builder.prismaObject("Delivery", {
  description: "One event on its way to one webhook: its state, the envelope, and its attempts.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "The delivery's id." }),
    eventId: t.exposeString("eventId", {
      description: "The event's id: the envelope's `id`, the same in every attempt, for receivers to deduplicate on.",
    }),
    eventType: t.exposeString("eventType", { description: "The event's type (see eventTypes)." }),
    status: t.expose("status", { type: DeliveryStatus, description: "Where it stands." }),
    attempts: t.exposeInt("attempts", { description: "How many attempts its current cycle made; a redelivery starts again at 0." }),
    nextAttemptAt: t.expose("nextAttemptAt", {
      type: "DateTime",
      description: "While pending, when its next attempt is due (while one is being sent, when that attempt's lease runs out); not meaningful once finished.",
    }),
    lastStatus: t.exposeInt("lastStatus", {
      nullable: true,
      description: "The HTTP status of its last attempt; null before the first, or when the last got no answer.",
    }),
    lastError: t.exposeString("lastError", {
      nullable: true,
      description: "Why its last attempt did not succeed, or why it was failed (its webhook was disabled); null before any attempt and after a success.",
    }),
    createdAt: t.expose("createdAt", { type: "DateTime", description: "When it was created: its event's createdAt, when the event was written (replays compare it with `since`)." }),
    completedAt: t.expose("completedAt", {
      type: "DateTime",
      nullable: true,
      description: "When it finished (succeeded, failed or gone); null while pending.",
    }),
    body: t.string({
      description: "The exact envelope sent, the same bytes in every attempt.",
      select: { event: { select: { body: true } } },
      resolve: (d) => d.event.body,
    }),
    attemptLog: t.relation("attemptLog", {
      description: `Its latest attempts, earlier cycles' included, oldest first: the last \`last\` of them (default ${ATTEMPTS_SHOWN}, one whole schedule; at most ${MAX_PAGE}). attemptCount says how many the log holds. Empty before the first.`,
      args: { last: t.arg.int({ defaultValue: ATTEMPTS_SHOWN, description: `How many of the latest attempts, 1 to ${MAX_PAGE}.` }) },
      query: (args) => ({ orderBy: [{ startedAt: "asc" }, { id: "asc" }], take: -boundedLast(args.last, ATTEMPTS_SHOWN) }),
    }),
    attemptCount: t.relationCount("attemptLog", { description: "How many attempts the log holds, earlier cycles' included." }),
  }),
});

const WebhookStats = builder.objectRef<Stats>("WebhookStats").implement({
  description: "A webhook's deliveries created in the last 24 hours, by state; each counts once, however many attempts it took.",
  fields: (t) => ({
    succeeded: t.exposeInt("succeeded", { description: "How many succeeded." }),
    failed: t.exposeInt("failed", { description: "How many failed (every attempt of the schedule failed, or the webhook was disabled)." }),
    gone: t.exposeInt("gone", { description: "How many the receiver answered 410 Gone." }),
    pending: t.exposeInt("pending", { description: "How many are still waiting or being sent, counted up to 10,000 (see pendingCapped)." }),
    pendingCapped: t.exposeBoolean("pendingCapped", { description: "True when more than 10,000 are pending: the count stopped there." }),
    successRate: t.exposeFloat("successRate", {
      nullable: true,
      description: "succeeded / (succeeded + failed + gone), from 0 to 1; null when none of them has finished.",
    }),
    lastSuccessAt: t.expose("lastSuccessAt", {
      type: "DateTime",
      nullable: true,
      description: "When its latest successful delivery completed, at any time (not only in the 24 hours); null when none ever succeeded.",
    }),
  }),
});

const headersLoaders = new WeakMap<GraphQLContext, DataLoader<string, Record<string, string>>>();

/**
 * An attempt stores which secrets signed it, not its headers (they follow from the body, the
 * time and the secrets): every attempt of a page is rebuilt in one statement per request.
 */
function headersLoader(ctx: GraphQLContext): DataLoader<string, Record<string, string>> {
  let loader = headersLoaders.get(ctx);
  if (!loader) {
    loader = new DataLoader(async (ids) => {
      const headers = await attemptRequestHeaders(ctx.deps.db, ctx.deps.master, await ctx.secret(), ids);
      return ids.map((id) => headers.get(id) ?? {});
    });
    headersLoaders.set(ctx, loader);
  }
  return loader;
}

/**
 * One loader per request (keyed by its context, which lives as long as the request): every
 * webhook of a list asks for its stats, and they are read in one statement.
 */
const statsLoaders = new WeakMap<GraphQLContext, DataLoader<string, Stats>>();

function statsLoader(ctx: GraphQLContext): DataLoader<string, Stats> {
  let loader = statsLoaders.get(ctx);
  if (!loader) {
    loader = new DataLoader(async (ids) => {
      const stats = await webhooksStats(ctx.deps.db, await ctx.secret(), ids);
      return ids.map((id) => stats.get(id)!);
    });
    statsLoaders.set(ctx, loader);
  }
  return loader;
}

/** A filter on a type nobody can subscribe to would match nothing: say so instead. */
function eventTypeFilter(eventType: string | null | undefined) {
  if (eventType == null) return {};
  const canonical = canonicalEventType(eventType);
  if (!canonical) throw badUserInput("eventType is not an event type (see eventTypes)");
  return { eventType: canonical };
}

type DeliveryFilters = { status?: typeof DeliveryStatus.$inferType | null; eventType?: string | null };

/**
 * How many of a webhook's newest deliveries a page filtered by event type, or by status
 * succeeded or gone, looks through (docs/graphql.md, "Operation limits"). No index serves those
 * filters (one on the deliveries would cost every delivery the worker records), so an unbounded
 * page read the webhook's whole log when few or none matched: 4,000 rows for an empty
 * `first: 1` page of a webhook with 4,000 deliveries, priced as one row, for every webhook, as
 * often as a secret key asked. A page with no filter, or filtered by status pending or failed
 * alone (each has an index of its own), reads no more than it shows and looks through the whole log.
 */
export const FILTER_LOOKBACK = 1_000;

/** Whether the filters look through the webhook's newest FILTER_LOOKBACK deliveries only. */
function lookedBack(args: DeliveryFilters): boolean {
  return args.eventType != null || args.status === "succeeded" || args.status === "gone";
}

/**
 * The newest of a webhook's deliveries older than its newest FILTER_LOOKBACK (its order: newest
 * first, ties by id), read at most once per request and webhook; null when it has no more than
 * that. The statement reads FILTER_LOOKBACK + 1 rows of the (webhook_id, created_at) index.
 */
const lookbackEnds = new WeakMap<GraphQLContext, Map<string, Promise<{ createdAt: Date; id: string } | null>>>();

function lookbackEnd(ctx: GraphQLContext, webhook: { id: string; projectId: string }) {
  let ends = lookbackEnds.get(ctx);
  if (!ends) lookbackEnds.set(ctx, (ends = new Map()));
  let end = ends.get(webhook.id);
  if (!end) {
    end = ctx.deps.prisma.delivery.findFirst({
      where: { webhookId: webhook.id, projectId: webhook.projectId },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
      skip: FILTER_LOOKBACK,
      select: { createdAt: true, id: true },
    });
    ends.set(webhook.id, end);
  }
  return end;
}

/**
 * The where of a webhook's deliveries: its own, in its project, matching the filters given;
 * for filters with no index of their own, among its newest FILTER_LOOKBACK deliveries.
 */
async function deliveriesWhere(ctx: GraphQLContext, webhook: { id: string; projectId: string }, args: DeliveryFilters) {
  const where = { webhookId: webhook.id, projectId: webhook.projectId, ...(args.status ? { status: args.status } : {}), ...eventTypeFilter(args.eventType) };
  const end = lookedBack(args) ? await lookbackEnd(ctx, webhook) : null;
  if (!end) return where;
  return { ...where, OR: [{ createdAt: { gt: end.createdAt } }, { createdAt: end.createdAt, id: { gt: end.id } }] };
}

builder.prismaObjectFields(Webhook, (t) => ({
  // A findMany of deliveries, not the relation nested in the webhook's query: Prisma's cursor on a
  // nested relation took 5.4 s for a page after the first at 500,000 deliveries (measured with
  // scripts/measure-dashboard.ts), the same cursor on a top-level findMany 27 ms.
  deliveries: t.prismaConnection(
    {
      type: Delivery,
      cursor: "id",
      description: `Its deliveries, newest first; \`first\` is at most ${MAX_PAGE} (default ${DEFAULT_PAGE}). Filtered by event type, or by status succeeded or gone, among its newest ${FILTER_LOOKBACK.toLocaleString("en")} deliveries only (see lookback).`,
      defaultSize: DEFAULT_PAGE,
      maxSize: boundedPage,
      args: {
        status: t.arg({ type: DeliveryStatus, description: "Only deliveries in this state; all when not given." }),
        eventType: t.arg.string({
          description: "Only deliveries of this event type (see eventTypes); all when not given. A name that is no event type is refused (BAD_USER_INPUT).",
        }),
      },
      resolve: async (query, webhook, args, ctx) => {
        const where = await deliveriesWhere(ctx, webhook, args);
        if (!(await cursorHeld(query, (id) => ctx.deps.prisma.delivery.count({ where: { ...where, id } })))) return [];
        return ctx.deps.prisma.delivery.findMany({ ...query, where, orderBy: [{ createdAt: "desc" }, { id: "desc" }] });
      },
      totalCount: async (webhook, args, ctx) => ctx.deps.prisma.delivery.count({ where: await deliveriesWhere(ctx, webhook, args) }),
    },
    {
      ...pageOf("a webhook's deliveries", "A delivery")[0],
      fields: (c) => ({
        // Pothos' own totalCount field (it takes no description), redefined with one: the plugin
        // puts a function on the connection that counts when the field is selected.
        totalCount: c.int({
          description: `How many deliveries match the filters, across all pages. Counting reads them all, so each totalCount costs ${AGGREGATE_COST} of an operation's cost budget, whatever the page size.`,
          extensions: { pothosPrismaTotalCount: true },
          resolve: (connection) => (connection as typeof connection & { totalCount: () => Promise<number> }).totalCount(),
        }),
        lookback: c.int({
          nullable: true,
          description: `When the filters looked through only the webhook's newest deliveries: how many (${FILTER_LOOKBACK.toLocaleString("en")}); its older deliveries are in no page and no totalCount of these filters. Null when the pages cover its whole log: no filter, status pending or failed alone, or a webhook with no more than ${FILTER_LOOKBACK.toLocaleString("en")} deliveries.`,
          resolve: async (connection, _, ctx) => {
            const { parent, args } = connection as typeof connection & { parent: { id: string; projectId: string }; args: DeliveryFilters };
            return lookedBack(args) && (await lookbackEnd(ctx, parent)) ? FILTER_LOOKBACK : null;
          },
        }),
      }),
    },
    pageOf("a webhook's deliveries", "A delivery")[1],
  ),
  stats: t.field({
    type: WebhookStats,
    description: "Its deliveries of the last 24 hours, by state.",
    resolve: (w, _, ctx) => statsLoader(ctx).load(w.id),
  }),
}));

const PulledEvent = builder.objectRef<Awaited<ReturnType<typeof pullEvents>>["events"][number]>("PulledEvent").implement({
  description: "One of the project's events, as webhooks receive it.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "The event's id: the envelope's `id`, as in its deliveries." }),
    eventType: t.exposeString("eventType", { description: "The event's type (see eventTypes)." }),
    createdAt: t.expose("createdAt", { type: "DateTime", description: "When it was written, in the transaction of the change it describes." }),
    cursor: t.exposeString("cursor", { description: "Its place in the project's events: pass it as `after` to read the events after it." }),
    body: t.exposeString("body", { description: "The exact envelope webhooks receive." }),
    envelope: t.field({ type: "JSON", description: "The same envelope, parsed.", resolve: (e) => JSON.parse(e.body) }),
  }),
});

const EventPage = builder.objectRef<Awaited<ReturnType<typeof pullEvents>>>("EventPage").implement({
  description: "A page of the project's events in commit order.",
  fields: (t) => ({
    events: t.field({
      type: [PulledEvent],
      description: "The events after the cursor sent, oldest first; test events are never included. May be empty.",
      resolve: (p) => p.events,
    }),
    endCursor: t.exposeString("endCursor", {
      nullable: true,
      description: "The cursor to send as `after` next: the last event's, or with an empty page the cursor sent; null when the page is empty and no cursor was sent.",
    }),
    hasMore: t.exposeBoolean("hasMore", {
      description: "Whether more events can be read now or soon: ask again with `after: endCursor` (events still being committed are held back meanwhile).",
    }),
  }),
});

const ReplayPayload = builder.objectRef<{ count: number }>("ReplayFailedDeliveriesPayload").implement({
  description: "The failed deliveries replayed.",
  fields: (t) => ({ count: t.exposeInt("count", { description: "How many deliveries were started again (0 when none matched)." }) }),
});

builder.queryFields((t) => ({
  events: t.field({
    type: EventPage,
    authScopes: { secret: true },
    description: `The project's events in commit order after a cursor, so a receiver that was down can catch up. It reaches back as far as the events' retention (LINKGATE_RETENTION_EVENTS_DAYS, 30 days by default). ${NEEDS.secret}`,
    args: {
      after: t.arg.string({
        description:
          "The endCursor (or an event's cursor) already processed; from the oldest event kept when not given. Another cursor is InvalidRequest; one with events after it already removed by retention is CursorExpired.",
      }),
      first: t.arg.int({ description: `How many events at most, 1 to ${MAX_PULL_LIMIT} (default ${MAX_PULL_LIMIT}); outside that, InvalidRequest.` }),
    },
    errors: { types: [E.InvalidRequest, E.CursorExpired], union: resultOf("The EventPage") },
    resolve: async (_, { after, first }, ctx) =>
      pullEvents(ctx.deps.db, await ctx.secret(), { master: ctx.deps.master, after, first, retentionDays: ctx.deps.config.retention.eventsDays }),
  }),
}));

builder.mutationFields((t) => ({
  redeliverWebhookDelivery: t.prismaField({
    type: Delivery,
    authScopes: { secret: true },
    description: `Starts one delivery over, whatever its state: pending and due now, attempts counted from 1 again, the whole schedule, the same body. One being sent right now is left alone and returned as it is. A project redelivers at most ${REDELIVERIES_PER_PROJECT.max} deliveries in ${REDELIVERIES_PER_PROJECT.windowSeconds / 60} minutes (RateLimited); replayFailedWebhookDeliveries is for many. ${NEEDS.secret}`,
    args: { deliveryId: t.arg.id({ required: true, description: "The delivery's id." }) },
    errors: { types: [...REDELIVER_ERRORS], union: resultOf("The Delivery, as it is now,") },
    resolve: async (query, _, args, ctx) => {
      const actor = await ctx.secret();
      const d = await redeliver(ctx.deps.db, actor, String(args.deliveryId));
      // Deleted right after the reset (its webhook deleted, or swept by retention): the
      // DeliveryNotFound a moment later would give, where findFirstOrThrow answered
      // INTERNAL_SERVER_ERROR (docs/webhooks.md, "Redelivery and replay").
      const delivery = await ctx.deps.prisma.delivery.findFirst({ ...query, where: { id: d.id, projectId: actor.projectId } });
      if (!delivery) throw new E.DeliveryNotFound();
      return delivery;
    },
  }),
  replayFailedWebhookDeliveries: t.field({
    type: ReplayPayload,
    authScopes: { secret: true },
    description: `Starts over, as redeliverWebhookDelivery does, every failed delivery of this webhook whose event happened at or after \`since\`. Gone, pending and succeeded deliveries are left as they are. ${NEEDS.secret}`,
    args: {
      webhookId: t.arg.id({ required: true, description: "The webhook's id." }),
      since: t.arg({ type: "DateTime", required: true, description: "The earliest event time to replay, between the years 1 and 9999." }),
    },
    errors: { types: [E.WebhookNotFound, E.InvalidRequest], union: resultOf("The ReplayFailedDeliveriesPayload") },
    resolve: async (_, args, ctx) => ({
      count: await replayFailed(ctx.deps.db, await ctx.secret(), String(args.webhookId), args.since),
    }),
  }),
}));
