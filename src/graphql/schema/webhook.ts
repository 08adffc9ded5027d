import * as E from "../../errors.ts";
import { EVENT_TYPES } from "../../webhooks/event-types.ts";
import {
  createWebhook,
  deleteWebhook,
  rotateWebhookSecret,
  sendTestWebhook,
  TRANSITION_MS,
  updateWebhook,
  ROTATE_SECRET_ERRORS,
  SEND_TEST_ERRORS,
  TEST_EVENTS_PER_PROJECT,
  webhooksOf,
} from "../../webhooks/service.ts";
import { builder } from "../builder.ts";
import { boundedPage, DEFAULT_PAGE, MAX_PAGE } from "../pages.ts";
import { cursorHeld, pageOf } from "./connections.ts";
import { resultOf } from "./errors.ts";
import { NEEDS } from "./root.ts";

const TRANSITION_DAYS = TRANSITION_MS / 86_400_000;

export const Webhook = builder.prismaObject("Webhook", {
  description:
    "An endpoint of the project: every event of a type it is subscribed to is delivered to it, signed with its secret, while it is enabled.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "The webhook's id." }),
    url: t.expose("url", {
      type: "URL",
      description: "Where deliveries are POSTed: an https:// URL whose host resolves to public addresses only, checked again before every attempt.",
    }),
    events: t.exposeStringList("events", {
      description: "The event types it is subscribed to (see eventTypes), each once, aliases stored under their canonical name.",
    }),
    description: t.exposeString("description", { description: "The project's note about it; empty when none was given." }),
    enabled: t.exposeBoolean("enabled", {
      description: "Whether it gets deliveries: false once the project disabled it, or after 24 hours in which every attempt failed.",
    }),
    disabledReason: t.exposeString("disabledReason", {
      nullable: true,
      description:
        "Why it is disabled: `disabled by the project`, or that every delivery attempt failed for 24 hours (and since when); null while enabled.",
    }),
    createdAt: t.expose("createdAt", { type: "DateTime", description: "When it was created." }),
    updatedAt: t.expose("updatedAt", { type: "DateTime", description: "When its settings last changed." }),
    transitionEndsAt: t.field({
      type: "DateTime",
      nullable: true,
      description:
        "While set, a rotation's transition: the previous secret still signs deliveries, alongside the current one, until then. Null outside a transition.",
      select: { previousSecretExpiresAt: true },
      resolve: (w) => (w.previousSecretExpiresAt && w.previousSecretExpiresAt > new Date() ? w.previousSecretExpiresAt : null),
    }),
  }),
});

const WebhookInput = builder.inputType("WebhookInput", {
  description: "A webhook's settings. Creating one needs `url` and `events`; an update changes only the fields given (null counts as not given).",
  fields: (t) => ({
    url: t.string({
      description: "An absolute https:// URL of at most 2048 characters whose host resolves to public addresses only. Needed on create.",
    }),
    events: t.stringList({
      description:
        "The event types to subscribe to, at least one (see eventTypes); `auth.login.success` is taken as user.authentication.success. Needed on create.",
    }),
    description: t.string({ description: "A note for the project, at most 500 characters; empty when not given on create." }),
    enabled: t.boolean({
      description: "On update: false disables it (reason `disabled by the project`), true re-enables it and clears the reason. Ignored on create.",
    }),
  }),
});

const CreateWebhookPayload = builder.objectRef<{ webhook: { id: string }; secret: string }>("CreateWebhookPayload").implement({
  description: "The new webhook and its signing secret.",
  fields: (t) => ({
    webhook: t.field({ type: Webhook, description: "The webhook created, enabled.", resolve: (p) => p.webhook as never }),
    secret: t.exposeString("secret", { description: "Its signing secret (whsec_…), shown on create and rotate only: store it now." }),
  }),
});

const UpdateWebhookPayload = builder.objectRef<{ webhook: { id: string } }>("UpdateWebhookPayload").implement({
  description: "The webhook's settings changed.",
  fields: (t) => ({ webhook: t.field({ type: Webhook, description: "The webhook as it is now.", resolve: (p) => p.webhook as never }) }),
});

const DeleteWebhookPayload = builder.objectRef<{ id: string }>("DeleteWebhookPayload").implement({
  description: "The webhook is deleted, with its deliveries and their log; its events stay and can still be pulled.",
  fields: (t) => ({ deletedId: t.exposeID("id", { description: "The id of the webhook deleted." }) }),
});

const RotateSecretPayload = builder
  .objectRef<{ webhookId: string; newSecret: string; transitionEndsAt: Date }>("RotateWebhookSecretPayload")
  .implement({
    description: "The webhook has a new signing secret; the one it replaced keeps signing alongside it until transitionEndsAt.",
    fields: (t) => ({
      success: t.boolean({ description: "Always true.", resolve: () => true }),
      webhookId: t.exposeID("webhookId", { description: "The webhook's id." }),
      newSecret: t.exposeString("newSecret", { description: "The new secret (whsec_…), shown this once: it signs from now on." }),
      transitionEndsAt: t.expose("transitionEndsAt", {
        type: "DateTime",
        description: `When the previous secret stops signing, ${TRANSITION_DAYS} days from the rotation.`,
      }),
    }),
  });

const TestEventPayload = builder.objectRef<{ eventId: string; webhookId: string; eventType: string }>("SendTestWebhookPayload").implement({
  description: "A sample event was recorded for this one webhook, and queued if it is enabled and subscribed to the type.",
  fields: (t) => ({
    eventId: t.exposeID("eventId", { description: "The test event's id: its envelope's `id`, and its delivery's eventId in the log." }),
    webhookId: t.exposeID("webhookId", { description: "The webhook's id." }),
    eventType: t.exposeString("eventType", { description: "The event type, under its canonical name." }),
  }),
});

builder.queryFields((t) => ({
  webhooks: t.prismaConnection(
    {
      type: Webhook,
      cursor: "id",
      authScopes: { secret: true },
      description: `The project's webhooks, oldest first; \`first\` is at most ${MAX_PAGE} (default ${DEFAULT_PAGE}). ${NEEDS.secret}`,
      defaultSize: DEFAULT_PAGE,
      maxSize: boundedPage,
      resolve: async (query, _, __, ctx) => {
        const where = webhooksOf(await ctx.secret());
        if (!(await cursorHeld(query, (id) => ctx.deps.prisma.webhook.count({ where: { ...where, id } })))) return [];
        return ctx.deps.prisma.webhook.findMany({ ...query, where, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
      },
    },
    ...pageOf("the project's webhooks", "A webhook"),
  ),
  webhook: t.prismaField({
    type: Webhook,
    nullable: true,
    authScopes: { secret: true },
    description: `One webhook of the project; null when the project has none with that id (another project's included). ${NEEDS.secret}`,
    args: { id: t.arg.id({ required: true, description: "The webhook's id." }) },
    resolve: async (query, _, { id }, ctx) => ctx.deps.prisma.webhook.findFirst({ ...query, where: { ...webhooksOf(await ctx.secret()), id: String(id) } }),
  }),
  eventTypes: t.stringList({
    description: `Every event type a webhook can subscribe to, such as user.created. ${NEEDS.nothing}`,
    resolve: () => [...EVENT_TYPES],
  }),
}));

const configErrors = [E.InvalidWebhookUrl, E.InvalidEventType, E.InvalidRequest];

builder.mutationFields((t) => ({
  createWebhook: t.field({
    type: CreateWebhookPayload,
    authScopes: { secret: true },
    description: `Adds a webhook to the project, enabled, with a new signing secret; it gets the events that happen from then on. ${NEEDS.secret}`,
    args: { input: t.arg({ type: WebhookInput, required: true, description: "Its url and events, and optionally a description." }) },
    errors: { types: configErrors, union: resultOf("The CreateWebhookPayload") },
    resolve: async (_, { input }, ctx) => createWebhook(ctx.deps, await ctx.secret(), input),
  }),
  updateWebhook: t.field({
    type: UpdateWebhookPayload,
    authScopes: { secret: true },
    description: `Changes the settings given of a webhook; the others stay. ${NEEDS.secret}`,
    args: {
      id: t.arg.id({ required: true, description: "The webhook's id." }),
      input: t.arg({ type: WebhookInput, required: true, description: "The settings to change." }),
    },
    errors: { types: [E.WebhookNotFound, ...configErrors], union: resultOf("The UpdateWebhookPayload") },
    resolve: async (_, { id, input }, ctx) => ({
      webhook: await updateWebhook(ctx.deps, await ctx.secret(), String(id), input),
    }),
  }),
  deleteWebhook: t.field({
    type: DeleteWebhookPayload,
    authScopes: { secret: true },
    description: `Deletes a webhook with its deliveries and their log. ${NEEDS.secret}`,
    args: { id: t.arg.id({ required: true, description: "The webhook's id." }) },
    errors: { types: [E.WebhookNotFound], union: resultOf("The DeleteWebhookPayload") },
    resolve: async (_, { id }, ctx) => deleteWebhook(ctx.deps, await ctx.secret(), String(id)),
  }),
  rotateWebhookSecret: t.field({
    type: RotateSecretPayload,
    authScopes: { secret: true },
    description: `Gives a webhook a new signing secret; the one it replaces keeps signing alongside it for ${TRANSITION_DAYS} days. Rotating during a transition drops the oldest secret. Of two rotations at the same moment, the loser gets InvalidRequest and can rotate again. ${NEEDS.secret}`,
    args: { webhookId: t.arg.id({ required: true, description: "The webhook's id." }) },
    errors: { types: [...ROTATE_SECRET_ERRORS], union: resultOf("The RotateWebhookSecretPayload") },
    resolve: async (_, { webhookId }, ctx) => rotateWebhookSecret(ctx.deps, await ctx.secret(), String(webhookId)),
  }),
  sendTestWebhook: t.field({
    type: TestEventPayload,
    authScopes: { secret: true },
    description: `Records a sample event of a type for this one webhook, with fake data and \`"test": true\` in its envelope, signed, retried and logged like any delivery. It is sent only if the webhook is enabled and subscribed to the type, and it is never pulled with events. A project sends at most ${TEST_EVENTS_PER_PROJECT.max} test events in ${TEST_EVENTS_PER_PROJECT.windowSeconds / 60} minutes (RateLimited). ${NEEDS.secret}`,
    args: {
      webhookId: t.arg.id({ required: true, description: "The webhook's id." }),
      eventType: t.arg.string({ required: true, description: "The event type to send a sample of (see eventTypes)." }),
    },
    errors: { types: [...SEND_TEST_ERRORS], union: resultOf("The SendTestWebhookPayload") },
    resolve: async (_, args, ctx) => sendTestWebhook(ctx.deps, await ctx.secret(), String(args.webhookId), args.eventType),
  }),
}));
