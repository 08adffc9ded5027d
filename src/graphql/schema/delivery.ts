// The delivery log: each webhook's deliveries with every attempt, redelivery and replay, a
// project's events pulled after a cursor, and per-webhook health.
import { pullEvents, redeliver, replayFailed, webhookStats } from "../../delivery/log.ts";
import * as E from "../../errors.ts";
import { builder } from "../builder.ts";
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

const WebhookStats = builder.objectRef<Awaited<ReturnType<typeof webhookStats>>>("WebhookStats").implement({
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

builder.prismaObjectFields(Webhook, (t) => ({
  deliveries: t.relatedConnection("deliveries", {
    cursor: "id",
    totalCount: true,
    args: { status: t.arg({ type: DeliveryStatus }), eventType: t.arg.string() },
    query: (args) => ({
      where: { ...(args.status ? { status: args.status } : {}), ...(args.eventType ? { eventType: args.eventType } : {}) },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    }),
  }),
  stats: t.field({
    type: WebhookStats,
    select: { projectId: true },
    resolve: (w, _, ctx) => webhookStats(ctx.deps.db, w.projectId, w.id),
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
    description: "the project's events in commit order after a cursor, so a receiver that was down can catch up",
    args: { after: t.arg.string(), first: t.arg.int() },
    resolve: async (_, args, ctx) => pullEvents(ctx.deps.db, (await ctx.secret()).projectId, { after: args.after, limit: args.first ?? 100 }),
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
    errors: { types: [E.WebhookNotFound] },
    resolve: async (_, args, ctx) => ({
      count: await replayFailed(ctx.deps.db, (await ctx.secret()).projectId, String(args.webhookId), args.since),
    }),
  }),
}));
