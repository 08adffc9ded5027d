// Every GraphQL document the dashboard sends, in one place: the GraphQL limits test checks that
// each of them passes the server's limits.

const WEBHOOK = `id url description events enabled disabledReason transitionEndsAt createdAt
  stats { succeeded failed gone pending pendingCapped successRate lastSuccessAt }`;

const ERR = `__typename ... on Error { message }`;

const DELIVERY = `id eventId eventType status attempts lastStatus lastError createdAt completedAt nextAttemptAt body attemptCount
  attemptLog { id attempt statusCode durationMs error responseExcerpt requestHeaders startedAt }`;

/**
 * Deliveries per request of the delivery log. Spelled out in the documents, since the server
 * prices a page size given by a variable at its largest (100): with each delivery's latest
 * attempts, a page of 100 is over the server's cost budget, a page of 50 well within it.
 */
export const DELIVERY_PAGE = 50;

const COUNTS = `succeeded retried failed p50Ms p95Ms`;
const CHART = `range stepSeconds from to points { start end ${COUNTS} } totals { ${COUNTS} }`;

const IDENTIFIER = `kind value origin createdAt`;

/**
 * What the Users view shows of an account, and no more: the server prices its lists at the most
 * they hold (50 sessions, 50 passkeys, 20 events of a delivery per webhook), and each field asked
 * of a session or a delivery is asked 50 or 400 times. As it is, the lookup costs 4,856 of the
 * server's budget of 5,000.
 */
const ACCOUNT = `id name email status createdAt updatedAt lastLoginAt mergeRole mergedAt
  identifiers { ${IDENTIFIER} }
  mergePartner { id name mergeRole identifiers { ${IDENTIFIER} } }
  passkeys { id name createdAt lastUsedAt deviceType }
  sessions { id createdAt lastUsedAt clientAddress userAgent }
  recentEvents(first: 20) { id eventType createdAt body deliveries { id status attempts lastStatus webhook { id url } } }`;

const OAUTH_CLIENT = `id clientId name redirectUris type firstParty createdAt`;

const PROVIDER = `id slug preset displayName issuer clientId scopes hasClientSecret callbackUrl sharedCallback createdAt`;

export const OPERATIONS = {
  OAuthClients: `query OAuthClients($first: Int!) { oauthClients(first: $first) { edges { node { ${OAUTH_CLIENT} } } } }`,
  CreateOAuthClient: `mutation CreateOAuthClient($input: OAuthClientInput!) {
    createOAuthClient(input: $input) { ${ERR} ... on OAuthClientWithSecret { client { ${OAUTH_CLIENT} } clientSecret } }
  }`,
  RotateOAuthClientSecret: `mutation RotateOAuthClientSecret($id: ID!) {
    rotateOAuthClientSecret(id: $id) { ${ERR} ... on OAuthClientWithSecret { client { ${OAUTH_CLIENT} } clientSecret } }
  }`,
  IdentityProviders: `query IdentityProviders { identityProviders { ${PROVIDER} } }`,
  CreateIdentityProvider: `mutation CreateIdentityProvider($input: IdentityProviderInput!) {
    createIdentityProvider(input: $input) { ${ERR} ... on IdentityProvider { ${PROVIDER} } }
  }`,
  UpdateIdentityProvider: `mutation UpdateIdentityProvider($id: ID!, $input: IdentityProviderInput!) {
    updateIdentityProvider(id: $id, input: $input) { ${ERR} ... on IdentityProvider { ${PROVIDER} } }
  }`,
  DeleteIdentityProvider: `mutation DeleteIdentityProvider($id: ID!) {
    deleteIdentityProvider(id: $id) { ${ERR} ... on DeleteIdentityProviderPayload { deletedId } }
  }`,
  Overview: `query Overview($first: Int!, $after: String) {
    eventTypes
    webhooks(first: $first, after: $after) { pageInfo { hasNextPage endCursor } edges { node { ${WEBHOOK} } } }
  }`,
  WebhookLog: `query WebhookLog($id: ID!, $status: DeliveryStatus, $eventType: String) {
    webhook(id: $id) {
      ${WEBHOOK}
      deliveries(first: ${DELIVERY_PAGE}, status: $status, eventType: $eventType) {
        lookback
        pageInfo { hasNextPage endCursor }
        edges { node { ${DELIVERY} } }
      }
    }
  }`,
  MoreDeliveries: `query MoreDeliveries($id: ID!, $after: String!, $status: DeliveryStatus, $eventType: String) {
    webhook(id: $id) {
      deliveries(first: ${DELIVERY_PAGE}, after: $after, status: $status, eventType: $eventType) {
        pageInfo { hasNextPage endCursor }
        edges { node { ${DELIVERY} } }
      }
    }
  }`,
  ProjectChart: `query ProjectChart($range: DeliveryChartRange!) { deliveryChart(range: $range) { ${CHART} } }`,
  WebhookChart: `query WebhookChart($id: ID!, $range: DeliveryChartRange!) { webhook(id: $id) { id deliveryChart(range: $range) { ${CHART} } } }`,
  FindEvent: `query FindEvent($eventId: ID!, $webhookId: ID!) {
    webhook(id: $webhookId) { ${WEBHOOK} }
    event(id: $eventId) { id deliveries(webhookId: $webhookId) { ${DELIVERY} } }
  }`,
  LookupAccount: `query LookupAccount($email: String, $phone: String, $accountId: ID) {
    lookupAccount(email: $email, phone: $phone, accountId: $accountId) { ${ERR} ... on AccountLookup { account { ${ACCOUNT} } } }
  }`,
  EndAccountSessions: `mutation EndAccountSessions($id: ID!) { endAccountSessions(accountId: $id) { ${ERR} ... on EndAccountSessionsPayload { ended } } }`,
  UnmergeAccount: `mutation UnmergeAccount($accountId: ID!, $partnerId: ID!) {
    unmergeAccount(accountId: $accountId, partnerId: $partnerId) { ${ERR} ... on UnmergeAccountPayload { primaryId secondaryId } }
  }`,
  Create: `mutation Create($input: WebhookInput!) { createWebhook(input: $input) { ${ERR} ... on CreateWebhookPayload { secret webhook { ${WEBHOOK} } } } }`,
  Update: `mutation Update($id: ID!, $input: WebhookInput!) { updateWebhook(id: $id, input: $input) { ${ERR} ... on UpdateWebhookPayload { webhook { ${WEBHOOK} } } } }`,
  Delete: `mutation Delete($id: ID!) { deleteWebhook(id: $id) { ${ERR} ... on DeleteWebhookPayload { deletedId } } }`,
  Rotate: `mutation Rotate($id: ID!) { rotateWebhookSecret(webhookId: $id) { ${ERR} ... on RotateWebhookSecretPayload { newSecret transitionEndsAt } } }`,
  SendTest: `mutation SendTest($id: ID!, $type: String!) { sendTestWebhook(webhookId: $id, eventType: $type) { ${ERR} ... on SendTestWebhookPayload { eventId eventType } } }`,
  Redeliver: `mutation Redeliver($id: ID!) { redeliverWebhookDelivery(deliveryId: $id) { ${ERR} ... on Delivery { id status } } }`,
  Replay: `mutation Replay($id: ID!, $since: DateTime!) { replayFailedWebhookDeliveries(webhookId: $id, since: $since) { ${ERR} ... on ReplayFailedDeliveriesPayload { count } } }`,
} as const;
