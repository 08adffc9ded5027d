// The dashboard's only way to the server: POST /graphql with the project API key (x-api-key).
// The key lives in sessionStorage, so it is gone when the browser session ends.
import { dataOf, postGraphQL } from "../../ui/graphql.ts";
import { DELIVERY_PAGE, OPERATIONS } from "./operations.ts";

const KEY = "linkgate.apiKey";

export const storedKey = (): string | null => sessionStorage.getItem(KEY);
export const saveKey = (key: string) => sessionStorage.setItem(KEY, key);
export const forgetKey = () => sessionStorage.removeItem(KEY);

/** The API key was refused (or is missing): the page asks for it again. */
export class AuthError extends Error {}

/**
 * A publishable key (what a front-end app ships) may only act for a signed-in user; webhooks
 * and their deliveries need the secret key.
 */
export class PublishableKeyError extends AuthError {}

export const SECRET_KEY_NEEDED =
  "This is a publishable key (lg_pk_…), which front-end apps ship: it cannot manage webhooks. Enter the project's secret key (lg_sk_…).";

/** Publishable keys are recognisable by their prefix: no need to ask the server. */
export const isPublishableKey = (key: string) => key.startsWith("lg_pk_");

let onAuthLost: ((message: string) => void) | null = null;
/** Called (besides the throw) whenever the server refuses the key, wherever the call came from. */
export const setAuthLostHandler = (fn: ((message: string) => void) | null) => {
  onAuthLost = fn;
};

export async function gql<T>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
  const key = storedKey();
  if (!key) throw new AuthError("Enter the project API key.");
  if (isPublishableKey(key)) {
    onAuthLost?.(SECRET_KEY_NEEDED);
    throw new PublishableKeyError(SECRET_KEY_NEEDED);
  }
  const answer = await postGraphQL<T>({ "x-api-key": key }, query, variables, "The server cannot be reached.");
  const err = answer.error;
  if (err) {
    const code = err.extensions?.code;
    if (err.extensions?.error === "SecretKeyRequired") {
      onAuthLost?.(SECRET_KEY_NEEDED);
      throw new PublishableKeyError(SECRET_KEY_NEEDED);
    }
    if (code === "UNAUTHENTICATED" || code === "FORBIDDEN" || answer.status === 401) {
      onAuthLost?.(err.message);
      throw new AuthError(err.message);
    }
    throw new Error(err.message);
  }
  return dataOf(answer);
}

// ---- types of what the page reads ---------------------------------------------------------------

export type Stats = { succeeded: number; failed: number; gone: number; pending: number; pendingCapped: boolean; successRate: number | null; lastSuccessAt: string | null };

export type Webhook = {
  id: string;
  url: string;
  description: string;
  events: string[];
  enabled: boolean;
  disabledReason: string | null;
  transitionEndsAt: string | null;
  createdAt: string;
  stats: Stats;
};

export type DeliveryStatus = "pending" | "succeeded" | "failed" | "gone";
export const DELIVERY_STATUSES: DeliveryStatus[] = ["pending", "succeeded", "failed", "gone"];

export type Attempt = {
  id: string;
  attempt: number;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  responseExcerpt: string | null;
  requestHeaders: Record<string, string> | null;
  startedAt: string;
};

export type Delivery = {
  id: string;
  eventId: string;
  /** the envelope exactly as sent: the bytes the signatures sign */
  body: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: string;
  completedAt: string | null;
  nextAttemptAt: string;
  /** the latest attempts (one schedule's worth), oldest first */
  attemptLog: Attempt[];
  /** how many attempts the log holds: more than attemptLog shows after redeliveries */
  attemptCount: number;
};

/** A mutation's error member: every one implements `interface Error { message }`. */
export type ApiError = { __typename: string; message: string };
type Result<T> = (T & { __typename: string; message?: undefined }) | ApiError;

export const isError = (r: { __typename: string; message?: string }): r is ApiError => typeof r.message === "string";

// ---- operations (documents in operations.ts) ----------------------------------------------------

/** The server's bound on `first` in every connection. */
export const MAX_PAGE = 100;

type Page<T> = { pageInfo: { hasNextPage: boolean; endCursor: string | null }; edges: { node: T }[] };

/**
 * The first `want` items of a connection, in pages of at most `pageSize`: `fetchPage` gets one
 * page after a cursor (null: the first page). A page whose size its document spells out may
 * bring more than `want`; they are left for the next call.
 */
async function collect<T>(want: number, fetchPage: (first: number, after: string | null) => Promise<Page<T> | null>, pageSize = MAX_PAGE) {
  const items: T[] = [];
  let after: string | null = null;
  let hasNextPage = true;
  while (hasNextPage && items.length < want) {
    const page = await fetchPage(Math.min(pageSize, want - items.length), after);
    if (!page) break;
    items.push(...page.edges.map((e) => e.node));
    ({ hasNextPage, endCursor: after } = page.pageInfo);
    if (!after) break;
  }
  return { items: items.slice(0, want), hasNextPage: hasNextPage || items.length > want };
}

/** The event types and the first `want` webhooks (oldest first). */
export async function loadOverview(want = MAX_PAGE) {
  let eventTypes: string[] = [];
  const { items, hasNextPage } = await collect<Webhook>(want, async (first, after) => {
    const d = await gql<{ eventTypes: string[]; webhooks: Page<Webhook> }>(OPERATIONS.Overview, { first, after });
    eventTypes = d.eventTypes;
    return d.webhooks;
  });
  return { eventTypes, webhooks: items, hasMoreWebhooks: hasNextPage };
}

/** `eventId`, when set, is a search: only that event's delivery is shown (status and type then do not apply). */
export type DeliveryFilter = { status: DeliveryStatus | ""; eventType: string; eventId: string };

/** A webhook with the delivery of one event to it (none when the event was not sent there), or null when it does not exist. */
async function findEventDelivery(id: string, eventId: string) {
  const d = await gql<{ webhook: Webhook | null; event: { id: string; deliveries: Delivery[] } | null }>(OPERATIONS.FindEvent, { webhookId: id, eventId });
  if (!d.webhook) return null;
  const deliveries = d.event?.deliveries ?? [];
  return { webhook: d.webhook, deliveries, hasNextPage: false, lookback: null, search: { eventId, eventExists: !!d.event } };
}

/** A webhook with its first `want` deliveries (newest first), or null when it does not exist. */
export async function loadWebhook(id: string, want: number, filter: DeliveryFilter) {
  if (filter.eventId) return findEventDelivery(id, filter.eventId);
  const vars = { id, status: filter.status || null, eventType: filter.eventType || null };
  // lookback: set when the filters looked through the webhook's newest deliveries only (docs/graphql.md)
  type Hook = Webhook & { deliveries: Page<Delivery> & { lookback: number | null } };
  let hook: Hook | null = null;
  const { items, hasNextPage } = await collect<Delivery>(
    want,
    async (_, after) => {
      if (after === null) {
        hook = (await gql<{ webhook: Hook | null }>(OPERATIONS.WebhookLog, vars)).webhook;
        return hook?.deliveries ?? null;
      }
      const more = await gql<{ webhook: { deliveries: Page<Delivery> } | null }>(OPERATIONS.MoreDeliveries, { ...vars, after });
      return more.webhook?.deliveries ?? null;
    },
    DELIVERY_PAGE,
  );
  if (!hook) return null;
  // No totalCount: counting a busy webhook's whole log on every 2-second poll costs more than the
  // page itself; the charts give the volume.
  const { deliveries: page, ...webhook } = hook as Hook;
  return { webhook: webhook as Webhook, deliveries: items, hasNextPage, lookback: page.lookback, search: null };
}

// ---- charts -------------------------------------------------------------------------------------

export type ChartRange = "day" | "week";
export type ChartCounts = { succeeded: number; retried: number; failed: number; p50Ms: number | null; p95Ms: number | null };
export type ChartPoint = ChartCounts & { start: string; end: string };
export type DeliveryChart = { range: ChartRange; stepSeconds: number; from: string; to: string; points: ChartPoint[]; totals: ChartCounts };

/** Every webhook's attempts (null `webhookId`: the project's), over the last 24 hours or 7 days. */
export async function loadChart(webhookId: string | null, range: ChartRange): Promise<DeliveryChart | null> {
  if (!webhookId) return (await gql<{ deliveryChart: DeliveryChart }>(OPERATIONS.ProjectChart, { range })).deliveryChart;
  const d = await gql<{ webhook: { deliveryChart: DeliveryChart } | null }>(OPERATIONS.WebhookChart, { id: webhookId, range });
  return d.webhook?.deliveryChart ?? null;
}

// ---- users, for support staff -------------------------------------------------------------------

export type Identifier = { kind: "email" | "phone"; value: string; origin: "own" | "attached"; createdAt: string };
export type MergeRole = "primary" | "secondary";

export type EventDelivery = {
  id: string;
  status: DeliveryStatus;
  attempts: number;
  lastStatus: number | null;
  webhook: { id: string; url: string };
};

export type AccountEvent = { id: string; eventType: string; createdAt: string; body: string; deliveries: EventDelivery[] };

export type Account = {
  id: string;
  name: string | null;
  email: string | null;
  status: "active" | "disabled";
  createdAt: string;
  updatedAt: string;
  lastLoginAt: string | null;
  mergeRole: MergeRole | null;
  mergedAt: string | null;
  identifiers: Identifier[];
  mergePartner: { id: string; name: string | null; mergeRole: MergeRole | null; identifiers: Identifier[] } | null;
  passkeys: { id: string; name: string; createdAt: string; lastUsedAt: string | null; deviceType: string }[];
  sessions: { id: string; createdAt: string; lastUsedAt: string | null; clientAddress: string | null; userAgent: string | null }[];
  recentEvents: AccountEvent[];
};

export type AccountQuery = { email?: string; phone?: string; accountId?: string };

/**
 * What a support person typed, as the lookup it names: an account id (acc_…), an e-mail address
 * (has an @), or else a phone number.
 */
export function accountQueryOf(text: string): AccountQuery {
  const t = text.trim();
  if (/^acc_/.test(t)) return { accountId: t };
  if (t.includes("@")) return { email: t };
  return { phone: t };
}

export const lookupAccount = (q: AccountQuery) =>
  gql<{ lookupAccount: Result<{ account: Account | null }> }>(OPERATIONS.LookupAccount, {
    email: q.email ?? null,
    phone: q.phone ?? null,
    accountId: q.accountId ?? null,
  }).then((d) => d.lookupAccount);

export const endAccountSessions = (accountId: string) =>
  gql<{ endAccountSessions: Result<{ ended: number }> }>(OPERATIONS.EndAccountSessions, { id: accountId }).then((d) => d.endAccountSessions);

export const unmergeAccount = (accountId: string, partnerId: string) =>
  gql<{ unmergeAccount: Result<{ primaryId: string; secondaryId: string }> }>(OPERATIONS.UnmergeAccount, { accountId, partnerId }).then(
    (d) => d.unmergeAccount,
  );

export type WebhookInput = { url?: string; events?: string[]; description?: string; enabled?: boolean };

export const createWebhook = (input: WebhookInput) =>
  gql<{ createWebhook: Result<{ secret: string; webhook: Webhook }> }>(OPERATIONS.Create, { input }).then((d) => d.createWebhook);

export const updateWebhook = (id: string, input: WebhookInput) =>
  gql<{ updateWebhook: Result<{ webhook: Webhook }> }>(OPERATIONS.Update, { id, input }).then((d) => d.updateWebhook);

export const deleteWebhook = (id: string) =>
  gql<{ deleteWebhook: Result<{ deletedId: string }> }>(OPERATIONS.Delete, { id }).then((d) => d.deleteWebhook);

export const rotateSecret = (webhookId: string) =>
  gql<{ rotateWebhookSecret: Result<{ newSecret: string; transitionEndsAt: string }> }>(OPERATIONS.Rotate, { id: webhookId }).then(
    (d) => d.rotateWebhookSecret,
  );

export const sendTest = (webhookId: string, eventType: string) =>
  gql<{ sendTestWebhook: Result<{ eventId: string; eventType: string }> }>(OPERATIONS.SendTest, { id: webhookId, type: eventType }).then(
    (d) => d.sendTestWebhook,
  );

export const redeliver = (deliveryId: string) =>
  gql<{ redeliverWebhookDelivery: Result<{ id: string; status: DeliveryStatus }> }>(OPERATIONS.Redeliver, { id: deliveryId }).then(
    (d) => d.redeliverWebhookDelivery,
  );

export const replayFailed = (webhookId: string, since: string) =>
  gql<{ replayFailedWebhookDeliveries: Result<{ count: number }> }>(OPERATIONS.Replay, { id: webhookId, since }).then(
    (d) => d.replayFailedWebhookDeliveries,
  );
