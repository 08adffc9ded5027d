// The delivery log: each webhook's deliveries with every attempt, redelivery and replay, a
// project's events pulled after a cursor, and per-webhook health.
import DataLoader from "dataloader";
import { pullEvents, redeliver, replayFailed, webhooksStats, type WebhookStats as Stats } from "../../delivery/log.ts";
import * as E from "../../errors.ts";
import { canonicalEventType } from "../../webhooks/event-types.ts";
import { builder } from "../builder.ts";
import type { GraphQLContext } from "../context.ts";
import { badUserInput, boundedPage, DEFAULT_PAGE, MAX_PAGE } from "../pages.ts";
import { Webhook } from "./webhook.ts";

const DeliveryStatus = builder.enumType("DeliveryStatus", {
  values: {
    pending: { description: "waiting for its next attempt (or being sent)" },
    succeeded: { description: "the receiver answered 200, 201 or 202" },
    failed: { description: "every attempt of the schedule failed" },
    gone: { description: "the receiver answered 410; no more attempts" },
  },
});

const DeliveryAttempt = builder.prismaObject("DeliveryAttempt", {
  fields: (t) => ({
    id: t.exposeID("id"),
    attempt: t.exposeInt("attempt"),
    startedAt: t.expose("startedAt", { type: "DateTime" }),
    durationMs: t.exposeInt("durationMs"),
    statusCode: t.exposeInt("statusCode", { nullable: true }),
    error: t.exposeString("error", { nullable: true }),
    responseExcerpt: t.exposeString("responseExcerpt", { nullable: true, description: "the first 1 KiB of the response" }),
    requestHeaders: t.expose("requestHeaders", { type: "JSON", description: "the headers sent" }),
  }),
});

const Delivery = builder.prismaObject("Delivery", {
  fields: (t) => ({
    id: t.exposeID("id"),
    eventId: t.exposeString("eventId"),
    eventType: t.exposeString("eventType"),
    status: t.expose("status", { type: DeliveryStatus }),
    attempts: t.exposeInt("attempts"),
    nextAttemptAt: t.expose("nextAttemptAt", { type: "DateTime" }),
    lastStatus: t.exposeInt("lastStatus", { nullable: true }),
    lastError: t.exposeString("lastError", { nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    completedAt: t.expose("completedAt", { type: "DateTime", nullable: true }),
    body: t.string({ description: "the exact envelope sent", select: { event: { select: { body: true } } }, resolve: (d) => d.event.body }),
    attemptLog: t.relation("attemptLog", { query: { orderBy: { startedAt: "asc" } } }),
  }),
});

const WebhookStats = builder.objectRef<Stats>("WebhookStats").implement({
  description: "deliveries created in the last 24 hours, by state",
  fields: (t) => ({
    succeeded: t.exposeInt("succeeded"),
    failed: t.exposeInt("failed"),
    gone: t.exposeInt("gone"),
    pending: t.exposeInt("pending"),
    successRate: t.exposeFloat("successRate", { nullable: true }),
    lastSuccessAt: t.expose("lastSuccessAt", { type: "DateTime", nullable: true }),
  }),
});

type StatsKey = { projectId: string; webhookId: string };

/**
 * One loader per request (keyed by its context, which lives as long as the request): every
 * webhook of a list asks for its stats, and they are read in one statement per project.
 */
const statsLoaders = new WeakMap<GraphQLContext, DataLoader<StatsKey, Stats, string>>();

function statsLoader(ctx: GraphQLContext): DataLoader<StatsKey, Stats, string> {
  let loader = statsLoaders.get(ctx);
  if (!loader) {
    loader = new DataLoader((keys) => loadStats(ctx, keys), { cacheKeyFn: (k) => `${k.projectId}/${k.webhookId}` });
    statsLoaders.set(ctx, loader);
  }
  return loader;
}

async function loadStats(ctx: GraphQLContext, keys: readonly StatsKey[]): Promise<Stats[]> {
  const found = new Map<string, Stats>();
  for (const projectId of new Set(keys.map((k) => k.projectId))) {
    const ids = keys.filter((k) => k.projectId === projectId).map((k) => k.webhookId);
    for (const [webhookId, s] of await webhooksStats(ctx.deps.db, projectId, ids)) found.set(`${projectId}/${webhookId}`, s);
  }
  return keys.map((k) => found.get(`${k.projectId}/${k.webhookId}`)!);
}

/** A filter on a type nobody can subscribe to would match nothing: say so instead. */
function eventTypeFilter(eventType: string | null | undefined) {
  if (eventType == null) return {};
  const canonical = canonicalEventType(eventType);
  if (!canonical) throw badUserInput("eventType is not an event type (see eventTypes)");
  return { eventType: canonical };
}

builder.prismaObjectFields(Webhook, (t) => ({
  deliveries: t.relatedConnection("deliveries", {
    cursor: "id",
    totalCount: true,
    description: `newest first; \`first\` is at most ${MAX_PAGE} (default ${DEFAULT_PAGE})`,
    defaultSize: DEFAULT_PAGE,
    maxSize: boundedPage,
    args: { status: t.arg({ type: DeliveryStatus }), eventType: t.arg.string() },
    query: (args) => ({
      where: { ...(args.status ? { status: args.status } : {}), ...eventTypeFilter(args.eventType) },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    }),
  }),
  stats: t.field({
    type: WebhookStats,
    select: { projectId: true },
    resolve: (w, _, ctx) => statsLoader(ctx).load({ projectId: w.projectId, webhookId: w.id }),
  }),
}));

const PulledEvent = builder.objectRef<Awaited<ReturnType<typeof pullEvents>>["events"][number]>("PulledEvent").implement({
  fields: (t) => ({
    id: t.exposeID("id"),
    eventType: t.exposeString("eventType"),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    cursor: t.exposeString("cursor"),
    body: t.exposeString("body", { description: "the exact envelope webhooks receive" }),
    envelope: t.field({ type: "JSON", resolve: (e) => JSON.parse(e.body) }),
  }),
});

const EventPage = builder.objectRef<Awaited<ReturnType<typeof pullEvents>>>("EventPage").implement({
  fields: (t) => ({
    events: t.field({ type: [PulledEvent], resolve: (p) => p.events }),
    endCursor: t.exposeString("endCursor", { nullable: true }),
    hasMore: t.exposeBoolean("hasMore"),
  }),
});

const ReplayPayload = builder.objectRef<{ count: number }>("ReplayFailedDeliveriesPayload").implement({
  fields: (t) => ({ count: t.exposeInt("count") }),
});

builder.queryFields((t) => ({
  events: t.field({
    type: EventPage,
    authScopes: { secret: true },
    description: `the project's events in commit order after a cursor, so a receiver that was down can catch up; \`first\` is 1 to ${MAX_PAGE} (default ${MAX_PAGE})`,
    args: { after: t.arg.string(), first: t.arg.int() },
    errors: { types: [E.InvalidRequest] },
    resolve: async (_, args, ctx) => {
      const first = args.first ?? MAX_PAGE;
      if (first < 1 || first > MAX_PAGE) throw new E.InvalidRequest(`first must be between 1 and ${MAX_PAGE}`);
      return pullEvents(ctx.deps.db, (await ctx.secret()).projectId, { after: args.after, limit: first });
    },
  }),
}));

builder.mutationFields((t) => ({
  redeliverWebhookDelivery: t.prismaField({
    type: Delivery,
    authScopes: { secret: true },
    args: { deliveryId: t.arg.id({ required: true }) },
    errors: { types: [E.DeliveryNotFound] },
    resolve: async (query, _, args, ctx) => {
      const { projectId } = await ctx.secret();
      const d = await redeliver(ctx.deps.db, projectId, String(args.deliveryId));
      return ctx.deps.prisma.delivery.findFirstOrThrow({ ...query, where: { id: d.id, projectId } });
    },
  }),
  replayFailedWebhookDeliveries: t.field({
    type: ReplayPayload,
    authScopes: { secret: true },
    description: "redelivers every failed delivery of this webhook whose event happened at or after `since`",
    args: { webhookId: t.arg.id({ required: true }), since: t.arg({ type: "DateTime", required: true }) },
    errors: { types: [E.WebhookNotFound, E.InvalidRequest] },
    resolve: async (_, args, ctx) => ({
      count: await replayFailed(ctx.deps.db, (await ctx.secret()).projectId, String(args.webhookId), args.since),
    }),
  }),
}));
