// The dashboard: what an event sent, delivery charts, and the users view
// for support staff. Everything here needs the project's secret key.
import { liveSessionWhere } from "../../auth/sessions.ts";
import { DEFAULT_RECENT_EVENTS, endAccountSessions, findAccountId, MAX_RECENT_EVENTS, PASSKEYS_LISTED, recentEventIds, SESSIONS_LISTED } from "../../support/users.ts";
import { CHART_RANGES, deliveryChart, type ChartCounts, type ChartPoint, type ChartRange, type DeliveryChart } from "../../delivery/charts.ts";
import * as E from "../../errors.ts";
import { unmergeForUser } from "../../linking/support.ts";
import { builder } from "../builder.ts";
import { resultOf } from "./errors.ts";
import { NEEDS } from "./root.ts";
import { accountField, MergeRole } from "./account.ts";
import { Webhook } from "./webhook.ts";

// ---- what was sent ------------------------------------------------------------------------------

const Event = builder.prismaObject("OutboxEvent", {
  name: "Event",
  description: "An event of the project, as webhooks receive it, with its deliveries.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "The event's id: its envelope's `id`, and the `webhook-id` and X-Service-Event-Id headers." }),
    eventType: t.exposeString("eventType", { description: "Its type, such as user.created." }),
    createdAt: t.expose("createdAt", { type: "DateTime", description: "When it was written, on the database's clock, to the millisecond (the envelope's created_at is the gateway's time as it made the event, a moment before)." }),
    test: t.exposeBoolean("test", { description: "Whether it is a test event (sendTestWebhook), sent to one webhook and never pulled." }),
    body: t.exposeString("body", {
      description:
        "The envelope exactly as sent, byte for byte: what X-Service-Signature signs, and what webhook-signature signs after `<id>.<timestamp>.`.",
    }),
    deliveries: t.relation("deliveries", {
      description: "Its deliveries, one per webhook it was sent to, oldest first.",
      args: { webhookId: t.arg.id({ description: "Only the delivery to this webhook (none when it was not sent there)." }) },
      query: (args) => ({
        where: args.webhookId == null ? {} : { webhookId: String(args.webhookId) },
        orderBy: [{ createdAt: "asc" }, { id: "asc" }],
      }),
    }),
  }),
});

builder.prismaObjectFields("Delivery", (t) => ({
  webhook: t.relation("webhook", { description: "The webhook it is sent to." }),
}));

// ---- charts -------------------------------------------------------------------------------------

const ChartRangeEnum = builder.enumType("DeliveryChartRange", {
  description: "The period a delivery chart covers.",
  values: {
    day: { description: `the last 24 hours, an hour a point (${CHART_RANGES.day.points} points)` },
    week: { description: `the last 7 days, six hours a point (${CHART_RANGES.week.points} points)` },
  } satisfies Record<ChartRange, { description: string }>,
});

const Counts = builder.interfaceRef<ChartCounts>("DeliveryCounts").implement({
  description: "Delivery attempts counted by outcome, with the latency of the successful ones.",
  fields: (t) => ({
    succeeded: t.exposeInt("succeeded", { description: "Attempts answered 200, 201 or 202." }),
    retried: t.exposeInt("retried", { description: "Failed attempts after which another attempt was scheduled." }),
    failed: t.exposeInt("failed", {
      description: "Failed attempts after which the delivery gave up: the last of the schedule, or one answered 410.",
    }),
    p50Ms: t.exposeInt("p50Ms", {
      nullable: true,
      description: "The median duration of the successful attempts, in ms (within 9 %: read from a histogram); null when none succeeded.",
    }),
    p95Ms: t.exposeInt("p95Ms", {
      nullable: true,
      description: "The 95th percentile duration of the successful attempts, in ms (within 9 %); null when none succeeded.",
    }),
  }),
});

const ChartTotals = builder.objectRef<ChartCounts>("DeliveryChartTotals").implement({
  description: "A chart's whole period at once.",
  interfaces: [Counts],
  isTypeOf: () => true,
  fields: () => ({}),
});

const ChartPointRef = builder.objectRef<ChartPoint>("DeliveryChartPoint").implement({
  description: "The delivery attempts started in one interval.",
  interfaces: [Counts],
  isTypeOf: (p) => "start" in (p as object),
  fields: (t) => ({
    start: t.expose("start", { type: "DateTime", description: "When the interval starts (a UTC hour, or a multiple of 6 UTC hours)." }),
    end: t.expose("end", { type: "DateTime", description: "When it ends; the last interval holds the present." }),
  }),
});

const ChartRef = builder.objectRef<DeliveryChart>("DeliveryChart").implement({
  description:
    "Delivery attempts over a period, interval by interval: succeeded, retried and failed, with the p50 and p95 latency of the successful ones. Counted as attempts are logged, so it answers at once whatever the size of the log.",
  fields: (t) => ({
    range: t.expose("range", { type: ChartRangeEnum, description: "The period covered." }),
    stepSeconds: t.exposeInt("stepSeconds", { description: "The length of an interval, in seconds." }),
    from: t.expose("from", { type: "DateTime", description: "When the first interval starts." }),
    to: t.expose("to", { type: "DateTime", description: "When the last interval ends." }),
    points: t.field({ type: [ChartPointRef], description: "The intervals, oldest first, each once, empty ones included.", resolve: (c) => c.points }),
    totals: t.field({ type: ChartTotals, description: "The whole period.", resolve: (c) => c.totals }),
  }),
});

const rangeArgs = builder.args((t) => ({
  range: t.field({ type: ChartRangeEnum, required: true, description: "The last 24 hours (`day`) or the last 7 days (`week`)." }),
}));

builder.prismaObjectFields(Webhook, (t) => ({
  deliveryChart: t.field({
    type: ChartRef,
    authScopes: { secret: true },
    description: `This webhook's delivery attempts over the last 24 hours or 7 days. ${NEEDS.secret}`,
    args: rangeArgs,
    resolve: async (w, args, ctx) => deliveryChart(ctx.deps.db, await ctx.secret(), args.range as ChartRange, w.id),
  }),
}));

// ---- users, for support staff -------------------------------------------------------------------

const MergePartner = builder.prismaObject("Account", {
  variant: "SupportMergePartner",
  description: "The other account of a merge, as support staff see it; look it up by its id for the rest.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "Its account id." }),
    name: t.exposeString("name", { nullable: true, description: "Its display name; null when none." }),
    mergeRole: t.expose("mergeRole", {
      type: MergeRole,
      nullable: true,
      description: "`primary` (it signs in and acts for both) or `secondary` (merged into the other).",
    }),
    identifiers: t.relation("identifiers", { description: "Its identifiers, oldest first.", query: { orderBy: { createdAt: "asc" } } }),
  }),
});

const SupportSession = builder.prismaObject("Session", {
  variant: "SupportSession",
  description: "A live session of the account, as support staff see it.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "The session's id: the `sid` of its tokens." }),
    createdAt: t.expose("createdAt", { type: "DateTime", description: "When it signed in." }),
    authTime: t.expose("authTime", { type: "DateTime", description: "Its last sign-in or re-authentication." }),
    lastUsedAt: t.expose("lastUsedAt", { type: "DateTime", nullable: true, description: "Its last request, to the minute; null until then." }),
    expiresAt: t.expose("expiresAt", { type: "DateTime", description: "When it ends unless used or ended before." }),
    clientAddress: t.exposeString("clientAddress", { nullable: true, description: "The client address it signed in from; null when unknown." }),
    userAgent: t.exposeString("userAgent", { nullable: true, description: "The User-Agent it signed in with; null when none was sent." }),
  }),
});

const SupportAccount = builder.prismaObject("Account", {
  variant: "SupportAccount",
  description: "An account of the project as support staff see it: its identifiers, merge, passkeys, sessions and recent events.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "The account id." }),
    name: t.exposeString("name", accountField.name),
    email: t.field(accountField.email),
    status: t.expose("status", accountField.status),
    createdAt: t.expose("createdAt", accountField.createdAt),
    updatedAt: t.expose("updatedAt", accountField.updatedAt),
    lastLoginAt: t.expose("lastLoginAt", accountField.lastLoginAt),
    identifiers: t.relation("identifiers", {
      description: "Its own identifiers, oldest first: `origin` says whether it signed up with each (own) or added it by linking (attached).",
      query: { orderBy: { createdAt: "asc" } },
    }),
    mergeRole: t.expose("mergeRole", {
      type: MergeRole,
      nullable: true,
      description: "`primary` or `secondary` while merged with mergePartner; null when not merged.",
    }),
    mergedAt: t.expose("mergedAt", accountField.mergedAt),
    mergePartner: t.relation("mergedWith", {
      type: MergePartner,
      nullable: true,
      description: "The account it is merged with (its secondary, or its primary); null when not merged.",
    }),
    passkeys: t.relation("passkeys", {
      description: "Its own passkeys, oldest first (a merged secondary's sign into its primary but are listed on the secondary).",
      query: { orderBy: [{ createdAt: "asc" }, { id: "asc" }], take: PASSKEYS_LISTED },
    }),
    sessions: t.relation("sessions", {
      type: SupportSession,
      description: `Its live sessions (neither ended nor expired), newest first, at most ${SESSIONS_LISTED}.`,
      query: () => ({ where: liveSessionWhere(), orderBy: [{ createdAt: "desc" }, { id: "desc" }], take: SESSIONS_LISTED }),
    }),
    recentEvents: t.prismaField({
      type: [Event],
      description: `Its most recent events, newest first: those about it, and the merges and unmerges it was the secondary of. \`first\` is 1 to ${MAX_RECENT_EVENTS} (default ${DEFAULT_RECENT_EVENTS}).`,
      args: { first: t.arg.int({ description: `How many, 1 to ${MAX_RECENT_EVENTS} (default ${DEFAULT_RECENT_EVENTS}).` }) },
      select: { projectId: true },
      resolve: async (query, account, args, ctx) => {
        const ids = await recentEventIds(ctx.deps.db, account.projectId, account.id, args.first);
        const rows = await ctx.deps.prisma.outboxEvent.findMany({ ...query, where: { id: { in: ids }, projectId: account.projectId } });
        return ids.map((id) => rows.find((r) => r.id === id)).filter((r) => r !== undefined);
      },
    }),
  }),
});

const AccountLookup = builder.objectRef<{ accountId: string | null }>("AccountLookup").implement({
  description: "What a lookup found.",
  fields: (t) => ({
    account: t.prismaField({
      type: SupportAccount,
      nullable: true,
      description: "The account; null when the project has none with that identifier or id (another project's included).",
      // With no account found, `in: []` matches nothing: the query Pothos built is used either way.
      resolve: async (query, l, _, ctx) =>
        ctx.deps.prisma.account.findFirst({ ...query, where: { id: l.accountId ?? { in: [] }, projectId: (await ctx.secret()).projectId } }),
    }),
  }),
});

const EndSessionsPayload = builder.objectRef<{ ended: number }>("EndAccountSessionsPayload").implement({
  description: "The account's sessions were ended: their tokens fail from their next request.",
  fields: (t) => ({ ended: t.exposeInt("ended", { description: "How many live sessions were ended (0 when there were none)." }) }),
});

const UnmergePayload = builder.objectRef<{ message: string; primaryId: string; secondaryId: string }>("UnmergeAccountPayload").implement({
  description: "The two accounts are separated; each signs in on its own again.",
  fields: (t) => ({
    message: t.exposeString("message", { description: "A confirmation in words for people." }),
    primaryId: t.exposeID("primaryId", { description: "The account that was the primary." }),
    secondaryId: t.exposeID("secondaryId", { description: "The account that was the secondary, back as it was." }),
  }),
});

builder.queryFields((t) => ({
  event: t.prismaField({
    type: Event,
    nullable: true,
    authScopes: { secret: true },
    description: `One event of the project by its id, with its exact body and its deliveries; null when the project has none with that id (another project's included). ${NEEDS.secret}`,
    args: { id: t.arg.id({ required: true, description: "The event's id (evt_…)." }) },
    resolve: async (query, _, args, ctx) => {
      const { projectId } = await ctx.secret();
      return ctx.deps.prisma.outboxEvent.findFirst({ ...query, where: { id: String(args.id).trim(), projectId } });
    },
  }),
  deliveryChart: t.field({
    type: ChartRef,
    authScopes: { secret: true },
    description: `All of the project's delivery attempts (every webhook, deleted ones included) over the last 24 hours or 7 days. ${NEEDS.secret}`,
    args: rangeArgs,
    resolve: async (_, args, ctx) => deliveryChart(ctx.deps.db, await ctx.secret(), args.range as ChartRange, null),
  }),
  lookupAccount: t.field({
    type: AccountLookup,
    authScopes: { secret: true },
    description: `Finds an account of the project by exactly one of its e-mail address, phone number (E.164) or account id, for support staff; an e-mail or phone of a merged secondary finds the secondary. ${NEEDS.secret}`,
    args: {
      email: t.arg.string({ description: "An e-mail address on the account (compared as sign-in compares them)." }),
      phone: t.arg.string({ description: "A phone number on the account, + and country code." }),
      accountId: t.arg.id({ description: "The account id (acc_…)." }),
    },
    errors: { types: [E.IdentifierRequired, E.InvalidIdentifier, E.InvalidRequest], union: resultOf("The AccountLookup") },
    resolve: async (_, args, ctx) => ({
      accountId: await findAccountId(ctx.deps.db, (await ctx.secret()).projectId, {
        email: args.email,
        phone: args.phone,
        accountId: args.accountId == null ? null : String(args.accountId),
      }),
    }),
  }),
}));

builder.mutationFields((t) => ({
  endAccountSessions: t.field({
    type: EndSessionsPayload,
    authScopes: { secret: true },
    description: `Ends every live session of an account of the project, for support staff: its tokens fail from their next request. Logged with the API key used. ${NEEDS.secret}`,
    args: { accountId: t.arg.id({ required: true, description: "The account's id." }) },
    errors: { types: [E.NotFound], union: resultOf("The EndAccountSessionsPayload") },
    resolve: async (_, args, ctx) => ({ ended: await endAccountSessions(ctx.deps, await ctx.secret(), String(args.accountId)) }),
  }),
  unmergeAccount: t.field({
    type: UnmergePayload,
    authScopes: { secret: true },
    description: `Separates two merged accounts on their user's behalf, for support staff, naming both (in either order) as the confirmation did. Emits what the user's own unmerge emits (user.unmerged and user.updated, and notices to both accounts' addresses); user.unmerged also carries \`"by": "support"\` and \`api_key_id\`, the key used. No recent sign-in is asked for: that check is the user's. ${NEEDS.secret}`,
    args: {
      accountId: t.arg.id({ required: true, description: "One of the two accounts." }),
      partnerId: t.arg.id({ required: true, description: "The account it is merged with." }),
    },
    errors: { types: [E.NotFound, E.NotMerged], union: resultOf("The UnmergeAccountPayload") },
    resolve: async (_, args, ctx) => {
      return unmergeForUser(ctx.deps, await ctx.secret(), String(args.accountId), String(args.partnerId));
    },
  }),
}));
