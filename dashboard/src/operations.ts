// Every GraphQL document the dashboard sends, in one place: the GraphQL limits test checks that
// each of them passes the server's limits.

const WEBHOOK = `id url description events enabled disabledReason transitionEndsAt createdAt
  stats { succeeded failed gone pending successRate lastSuccessAt }`;

const ERR = `__typename ... on Error { message }`;

const DELIVERY = `id eventId eventType status attempts lastStatus lastError createdAt completedAt nextAttemptAt
  attemptLog { id attempt statusCode durationMs error responseExcerpt requestHeaders startedAt }`;

export const OPERATIONS = {
  Overview: `query Overview($first: Int!, $after: String) {
    eventTypes
    webhooks(first: $first, after: $after) { pageInfo { hasNextPage endCursor } edges { node { ${WEBHOOK} } } }
  }`,
  WebhookLog: `query WebhookLog($id: ID!, $first: Int!, $status: DeliveryStatus, $eventType: String) {
    webhook(id: $id) {
      ${WEBHOOK}
      deliveries(first: $first, status: $status, eventType: $eventType) {
        totalCount
        pageInfo { hasNextPage endCursor }
        edges { node { ${DELIVERY} } }
      }
    }
  }`,
  MoreDeliveries: `query MoreDeliveries($id: ID!, $first: Int!, $after: String!, $status: DeliveryStatus, $eventType: String) {
    webhook(id: $id) {
      deliveries(first: $first, after: $after, status: $status, eventType: $eventType) {
        pageInfo { hasNextPage endCursor }
        edges { node { ${DELIVERY} } }
      }
    }
  }`,
  Create: `mutation Create($input: WebhookInput!) { createWebhook(input: $input) { ${ERR} ... on CreateWebhookPayload { secret webhook { ${WEBHOOK} } } } }`,
  Update: `mutation Update($id: ID!, $input: WebhookInput!) { updateWebhook(id: $id, input: $input) { ${ERR} ... on UpdateWebhookPayload { webhook { ${WEBHOOK} } } } }`,
  Delete: `mutation Delete($id: ID!) { deleteWebhook(id: $id) { ${ERR} ... on DeleteWebhookPayload { deletedId } } }`,
  Rotate: `mutation Rotate($id: ID!) { rotateWebhookSecret(webhookId: $id) { ${ERR} ... on RotateWebhookSecretPayload { newSecret transitionEndsAt } } }`,
  SendTest: `mutation SendTest($id: ID!, $type: String!) { sendTestWebhook(webhookId: $id, eventType: $type) { ${ERR} ... on SendTestWebhookPayload { eventId eventType } } }`,
  Redeliver: `mutation Redeliver($id: ID!) { redeliverWebhookDelivery(deliveryId: $id) { ${ERR} ... on Delivery { id status } } }`,
  Replay: `mutation Replay($id: ID!, $since: DateTime!) { replayFailedWebhookDeliveries(webhookId: $id, since: $since) { ${ERR} ... on ReplayFailedDeliveriesPayload { count } } }`,
} as const;
