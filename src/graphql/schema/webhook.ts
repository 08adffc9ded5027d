import * as E from "../../errors.ts";
import { EVENT_TYPES } from "../../webhooks/event-types.ts";
import {
  createWebhook,
  deleteWebhook,
  rotateWebhookSecret,
  sendTestWebhook,
  updateWebhook,
} from "../../webhooks/service.ts";
import { builder } from "../builder.ts";
import { boundedPage, DEFAULT_PAGE, MAX_PAGE } from "../pages.ts";

export const Webhook = builder.prismaObject("Webhook", {
  fields: (t) => ({
    id: t.exposeID("id"),
    url: t.expose("url", { type: "URL" }),
    events: t.exposeStringList("events"),
    description: t.exposeString("description"),
    enabled: t.exposeBoolean("enabled"),
    disabledReason: t.exposeString("disabledReason", { nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    transitionEndsAt: t.field({
      type: "DateTime",
      nullable: true,
      description: "while set, the previous secret still verifies deliveries",
      select: { previousSecretExpiresAt: true },
      resolve: (w) => (w.previousSecretExpiresAt && w.previousSecretExpiresAt > new Date() ? w.previousSecretExpiresAt : null),
    }),
  }),
});

const WebhookInput = builder.inputType("WebhookInput", {
  fields: (t) => ({
    url: t.string(),
    events: t.stringList(),
    description: t.string(),
    enabled: t.boolean({ description: "on update: false disables, true re-enables" }),
  }),
});

const CreateWebhookPayload = builder.objectRef<{ webhook: { id: string }; secret: string }>("CreateWebhookPayload").implement({
  fields: (t) => ({
    webhook: t.field({ type: Webhook, resolve: (p) => p.webhook as never }),
    secret: t.exposeString("secret", { description: "shown on create and rotate only" }),
  }),
});

const UpdateWebhookPayload = builder.objectRef<{ webhook: { id: string } }>("UpdateWebhookPayload").implement({
  fields: (t) => ({ webhook: t.field({ type: Webhook, resolve: (p) => p.webhook as never }) }),
});

const DeleteWebhookPayload = builder.objectRef<{ id: string }>("DeleteWebhookPayload").implement({
  fields: (t) => ({ deletedId: t.exposeID("id") }),
});

const RotateSecretPayload = builder
  .objectRef<{ webhookId: string; newSecret: string; transitionEndsAt: Date }>("RotateWebhookSecretPayload")
  .implement({
    fields: (t) => ({
      success: t.boolean({ resolve: () => true }),
      webhookId: t.exposeID("webhookId"),
      newSecret: t.exposeString("newSecret"),
      transitionEndsAt: t.expose("transitionEndsAt", { type: "DateTime" }),
    }),
  });

const TestEventPayload = builder.objectRef<{ eventId: string; webhookId: string; eventType: string }>("SendTestWebhookPayload").implement({
  fields: (t) => ({
    eventId: t.exposeID("eventId"),
    webhookId: t.exposeID("webhookId"),
    eventType: t.exposeString("eventType"),
  }),
});

builder.queryFields((t) => ({
  webhooks: t.prismaConnection({
    type: Webhook,
    cursor: "id",
    authScopes: { secret: true },
    description: `the project's webhooks, oldest first; \`first\` is at most ${MAX_PAGE} (default ${DEFAULT_PAGE})`,
    defaultSize: DEFAULT_PAGE,
    maxSize: boundedPage,
    resolve: async (query, _, __, ctx) => {
      const { projectId } = await ctx.secret();
      return ctx.deps.prisma.webhook.findMany({ ...query, where: { projectId }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
    },
  }),
  webhook: t.prismaField({
    type: Webhook,
    nullable: true,
    authScopes: { secret: true },
    args: { id: t.arg.id({ required: true }) },
    resolve: async (query, _, { id }, ctx) => {
      const { projectId } = await ctx.secret();
      return ctx.deps.prisma.webhook.findFirst({ ...query, where: { id: String(id), projectId } });
    },
  }),
  eventTypes: t.stringList({ resolve: () => [...EVENT_TYPES] }),
}));

const configErrors = [E.InvalidWebhookUrl, E.InvalidEventType, E.InvalidRequest];

builder.mutationFields((t) => ({
  createWebhook: t.field({
    type: CreateWebhookPayload,
    authScopes: { secret: true },
    args: { input: t.arg({ type: WebhookInput, required: true }) },
    errors: { types: configErrors },
    resolve: async (_, { input }, ctx) => createWebhook(ctx.deps, (await ctx.secret()).projectId, input),
  }),
  updateWebhook: t.field({
    type: UpdateWebhookPayload,
    authScopes: { secret: true },
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: WebhookInput, required: true }) },
    errors: { types: [E.WebhookNotFound, ...configErrors] },
    resolve: async (_, { id, input }, ctx) => ({
      webhook: await updateWebhook(ctx.deps, (await ctx.secret()).projectId, String(id), input),
    }),
  }),
  deleteWebhook: t.field({
    type: DeleteWebhookPayload,
    authScopes: { secret: true },
    args: { id: t.arg.id({ required: true }) },
    errors: { types: [E.WebhookNotFound] },
    resolve: async (_, { id }, ctx) => deleteWebhook(ctx.deps, (await ctx.secret()).projectId, String(id)),
  }),
  rotateWebhookSecret: t.field({
    type: RotateSecretPayload,
    authScopes: { secret: true },
    args: { webhookId: t.arg.id({ required: true }) },
    errors: { types: [E.WebhookNotFound, E.InvalidRequest] },
    resolve: async (_, { webhookId }, ctx) => rotateWebhookSecret(ctx.deps, (await ctx.secret()).projectId, String(webhookId)),
  }),
  sendTestWebhook: t.field({
    type: TestEventPayload,
    authScopes: { secret: true },
    args: { webhookId: t.arg.id({ required: true }), eventType: t.arg.string({ required: true }) },
    errors: { types: [E.WebhookNotFound, E.InvalidEventType] },
    resolve: async (_, args, ctx) => sendTestWebhook(ctx.deps, (await ctx.secret()).projectId, String(args.webhookId), args.eventType),
  }),
}));
