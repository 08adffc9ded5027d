// The dashboard's only way to the server: POST /graphql with the project API key (x-api-key).
// The key lives in sessionStorage, so it is gone when the browser session ends.

const KEY = "linkgate.apiKey";

export const storedKey = (): string | null => sessionStorage.getItem(KEY);
export const saveKey = (key: string) => sessionStorage.setItem(KEY, key);
export const forgetKey = () => sessionStorage.removeItem(KEY);

/** The API key was refused (or is missing): the page asks for it again. */
export class AuthError extends Error {}

let onAuthLost: ((message: string) => void) | null = null;
/** Called (besides the throw) whenever the server refuses the key, wherever the call came from. */
export const setAuthLostHandler = (fn: ((message: string) => void) | null) => {
  onAuthLost = fn;
};

export async function gql<T>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
  const key = storedKey();
  if (!key) throw new AuthError("Enter the project API key.");
  let res: Response;
  try {
    res = await fetch("/graphql", {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json", "x-api-key": key },
      body: JSON.stringify({ query, variables }),
    });
  } catch {
    throw new Error("The server cannot be reached.");
  }
  let body: { data?: T; errors?: { message: string; extensions?: { code?: string } }[] };
  try {
    body = await res.json();
  } catch {
    throw new Error(`The server answered ${res.status} without a GraphQL response.`);
  }
  const err = body.errors?.[0];
  if (err) {
    const code = err.extensions?.code;
    if (code === "UNAUTHENTICATED" || code === "FORBIDDEN" || res.status === 401) {
      onAuthLost?.(err.message);
      throw new AuthError(err.message);
    }
    throw new Error(err.message);
  }
  if (!body.data) throw new Error(`The server answered ${res.status} without data.`);
  return body.data;
}

// ---- types of what the page reads ---------------------------------------------------------------

export type Stats = { succeeded: number; failed: number; gone: number; pending: number; successRate: number | null; lastSuccessAt: string | null };

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
  requestHeaders: Record<string, string>;
  startedAt: string;
};

export type Delivery = {
  id: string;
  eventId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: string;
  completedAt: string | null;
  nextAttemptAt: string;
  attemptLog: Attempt[];
};

/** A mutation's error member: every one implements `interface Error { message }`. */
export type ApiError = { __typename: string; message: string };
type Result<T> = (T & { __typename: string; message?: undefined }) | ApiError;

export const isError = (r: { __typename: string; message?: string }): r is ApiError => typeof r.message === "string";

// ---- operations ---------------------------------------------------------------------------------

const WEBHOOK = `id url description events enabled disabledReason transitionEndsAt createdAt
  stats { succeeded failed gone pending successRate lastSuccessAt }`;

const ERR = `__typename ... on Error { message }`;

export const loadOverview = () =>
  gql<{ eventTypes: string[]; webhooks: Webhook[] }>(`query Overview { eventTypes webhooks { ${WEBHOOK} } }`);

export type DeliveryFilter = { status: DeliveryStatus | ""; eventType: string };

export const loadWebhook = (id: string, first: number, filter: DeliveryFilter) =>
  gql<{
    webhook: (Webhook & { deliveries: { totalCount: number; pageInfo: { hasNextPage: boolean }; edges: { node: Delivery }[] } }) | null;
  }>(
    `query WebhookLog($id: ID!, $first: Int!, $status: DeliveryStatus, $eventType: String) {
      webhook(id: $id) {
        ${WEBHOOK}
        deliveries(first: $first, status: $status, eventType: $eventType) {
          totalCount
          pageInfo { hasNextPage }
          edges { node {
            id eventId eventType status attempts lastStatus lastError createdAt completedAt nextAttemptAt
            attemptLog { id attempt statusCode durationMs error responseExcerpt requestHeaders startedAt }
          } }
        }
      }
    }`,
    { id, first, status: filter.status || null, eventType: filter.eventType || null },
  );

export type WebhookInput = { url?: string; events?: string[]; description?: string; enabled?: boolean };

export const createWebhook = (input: WebhookInput) =>
  gql<{ createWebhook: Result<{ secret: string; webhook: Webhook }> }>(
    `mutation Create($input: WebhookInput!) { createWebhook(input: $input) { ${ERR} ... on CreateWebhookPayload { secret webhook { ${WEBHOOK} } } } }`,
    { input },
  ).then((d) => d.createWebhook);

export const updateWebhook = (id: string, input: WebhookInput) =>
  gql<{ updateWebhook: Result<{ webhook: Webhook }> }>(
    `mutation Update($id: ID!, $input: WebhookInput!) { updateWebhook(id: $id, input: $input) { ${ERR} ... on UpdateWebhookPayload { webhook { ${WEBHOOK} } } } }`,
    { id, input },
  ).then((d) => d.updateWebhook);

export const deleteWebhook = (id: string) =>
  gql<{ deleteWebhook: Result<{ deletedId: string }> }>(
    `mutation Delete($id: ID!) { deleteWebhook(id: $id) { ${ERR} ... on DeleteWebhookPayload { deletedId } } }`,
    { id },
  ).then((d) => d.deleteWebhook);

export const rotateSecret = (webhookId: string) =>
  gql<{ rotateWebhookSecret: Result<{ newSecret: string; transitionEndsAt: string }> }>(
    `mutation Rotate($id: ID!) { rotateWebhookSecret(webhookId: $id) { ${ERR} ... on RotateWebhookSecretPayload { newSecret transitionEndsAt } } }`,
    { id: webhookId },
  ).then((d) => d.rotateWebhookSecret);

export const sendTest = (webhookId: string, eventType: string) =>
  gql<{ sendTestWebhook: Result<{ eventId: string; eventType: string }> }>(
    `mutation SendTest($id: ID!, $type: String!) { sendTestWebhook(webhookId: $id, eventType: $type) { ${ERR} ... on SendTestWebhookPayload { eventId eventType } } }`,
    { id: webhookId, type: eventType },
  ).then((d) => d.sendTestWebhook);

export const redeliver = (deliveryId: string) =>
  gql<{ redeliverWebhookDelivery: Result<{ id: string; status: DeliveryStatus }> }>(
    `mutation Redeliver($id: ID!) { redeliverWebhookDelivery(deliveryId: $id) { ${ERR} ... on Delivery { id status } } }`,
    { id: deliveryId },
  ).then((d) => d.redeliverWebhookDelivery);

export const replayFailed = (webhookId: string, since: string) =>
  gql<{ replayFailedWebhookDeliveries: Result<{ count: number }> }>(
    `mutation Replay($id: ID!, $since: DateTime!) { replayFailedWebhookDeliveries(webhookId: $id, since: $since) { ${ERR} ... on ReplayFailedDeliveriesPayload { count } } }`,
    { id: webhookId, since },
  ).then((d) => d.replayFailedWebhookDeliveries);
