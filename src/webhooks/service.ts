// Webhook configuration (docs/webhooks.md). Every function takes the caller as an actor and
// reads its rows through webhooksOf, so the secret-key rule holds whichever transport called,
// and another project's webhook is simply not found.
import { requireSecretKey, type Deps, type KeyActor } from "../deps.ts";
import { seal } from "../crypto.ts";
import { lockProject } from "../db/locks.ts";
import { DecideAgain, retryingConflicts, transaction } from "../db/transaction.ts";
import { enqueue } from "./outbox.ts";
import { InvalidEventType, InvalidRequest, InvalidWebhookUrl, RateLimited, Unauthenticated, WebhookNotFound } from "../errors.ts";
import { newId } from "../ids.ts";
import { consumePerProject, type Limit } from "../rate-limit.ts";
import { canonicalEventType, type EventType } from "./event-types.ts";
import { sampleEventData } from "./samples.ts";
import { generateWebhookSecret } from "./secrets.ts";
import { assertSafeTarget, UnsafeWebhookTarget } from "./target-guard.ts";
import { charLength, clip } from "../text.ts";

export const TRANSITION_MS = 7 * 24 * 3600 * 1000;

export type WebhookInput = { url?: unknown; events?: unknown; description?: unknown; enabled?: unknown };

const MAX_URL = 2048;
const TOO_LONG = `url must be a string of at most ${MAX_URL} characters`;

async function checkUrl(deps: Deps, url: unknown): Promise<string> {
  if (typeof url !== "string" || charLength(url) > MAX_URL) throw new InvalidWebhookUrl(TOO_LONG);
  try {
    await assertSafeTarget(url, { allowPrivate: deps.config.webhookAllowPrivate, signal: AbortSignal.timeout(deps.config.webhookTimeoutMs) });
  } catch (err) {
    if (err instanceof UnsafeWebhookTarget) throw new InvalidWebhookUrl(err.message);
    throw err;
  }
  // what is stored and sent is the URL written out: percent-encoding can make it six times longer
  const stored = new URL(url).toString();
  if (stored.length > MAX_URL) throw new InvalidWebhookUrl(`${TOO_LONG}, percent-encoded as it is sent`);
  return stored;
}

export function parseEvents(events: unknown): EventType[] {
  if (!Array.isArray(events) || events.length === 0) throw new InvalidEventType("events must be a non-empty list of event types");
  const out = new Set<EventType>();
  for (const e of events) {
    const canonical = typeof e === "string" ? canonicalEventType(e) : undefined;
    if (!canonical) throw new InvalidEventType(`unknown event type: ${clip(String(e), 100)}`);
    out.add(canonical);
  }
  return [...out];
}

function parseDescription(d: unknown): string {
  if (d === undefined || d === null) return "";
  if (typeof d !== "string" || charLength(d) > 500) throw new InvalidRequest("description must be a string of at most 500 characters");
  return d;
}

/**
 * The WHERE of the actor's webhooks. Only the project's secret key reaches them ("Everything
 * here needs the project's secret key", docs/webhooks.md): refused here, not by each transport.
 */
export function webhooksOf(actor: KeyActor): { projectId: string } {
  return { projectId: requireSecretKey(actor).projectId };
}

/**
 * A project holds at most LINKGATE_WEBHOOKS_PER_PROJECT webhooks (20 unless configured;
 * docs/webhooks.md). The workers are shared by every project: when deliveries took turns by
 * webhook alone, a project with hundreds of slow endpoints, each answering just under the
 * timeout, kept all send slots busy, and another project's delivery waited 10.7 s behind 300 of
 * them (23 ms behind 20). They now take turns by project first (src/delivery/sql.ts); the cap
 * still bounds the work one project's configuration makes. 20 is GitHub's bound per event and
 * repository (Stripe's is 16 per account).
 */
export async function createWebhook(deps: Deps, actor: KeyActor, input: WebhookInput) {
  const { projectId } = webhooksOf(actor);
  const url = await checkUrl(deps, input.url);
  const events = parseEvents(input.events);
  const secret = generateWebhookSecret();
  const webhook = await transaction(deps.prisma, async (tx) => {
    if (!(await lockProject(tx, projectId))) throw new Unauthenticated();
    const most = deps.config.webhooksPerProject;
    if ((await tx.webhook.count({ where: { projectId } })) >= most) {
      throw new InvalidRequest(`a project holds at most ${most} webhooks; delete one first`);
    }
    return tx.webhook.create({
      data: { id: newId("wh"), projectId, url, events, description: parseDescription(input.description), secretSealed: seal(deps.master, secret) },
    });
  });
  return { webhook, secret };
}

export async function findWebhook(deps: Deps, actor: KeyActor, id: unknown) {
  const where = webhooksOf(actor);
  const webhook = typeof id === "string" ? await deps.prisma.webhook.findFirst({ where: { ...where, id } }) : null;
  if (!webhook) throw new WebhookNotFound();
  return webhook;
}

export async function updateWebhook(deps: Deps, actor: KeyActor, id: unknown, input: WebhookInput) {
  const data: Record<string, unknown> = {};
  if (input.url !== undefined && input.url !== null) data.url = await checkUrl(deps, input.url);
  if (input.events !== undefined && input.events !== null) data.events = parseEvents(input.events);
  if (input.description !== undefined && input.description !== null) data.description = parseDescription(input.description);
  let enabled: boolean | undefined;
  if (input.enabled !== undefined && input.enabled !== null) {
    if (typeof input.enabled !== "boolean") throw new InvalidRequest("enabled must be a boolean");
    enabled = input.enabled;
  }
  // Decided on the webhook as read, and written only if it still is (DecideAgain: read again and
  // decide again, as after any conflict): a worker that disabled the webhook (every delivery
  // failing for a day) between the read and the write made an enable that had read it enabled
  // turn it on again with the record that disabled it, and it was disabled again at the workers'
  // next check, where docs/webhooks.md promises an enabled-again webhook a fresh record. A
  // deletion committed meanwhile is the WebhookNotFound of the next read, not a fault.
  return retryingConflicts(async () => {
    const current = await findWebhook(deps, actor, id);
    const write = { ...data };
    if (enabled !== undefined) {
      write.enabled = enabled;
      if (enabled) write.disabledReason = null;
      else if (current.enabled) write.disabledReason = "disabled by the project";
    }
    // An endpoint enabled again, or moved, starts its record afresh: judged on the failures that
    // disabled it, it was disabled again within a minute (src/delivery/dead-webhooks.ts)
    const enabledAgain = enabled === true && !current.enabled;
    const moved = write.url !== undefined && write.url !== current.url;
    if (enabledAgain || moved) write.failuresCountedFrom = new Date();
    const [updated] = await deps.prisma.webhook.updateManyAndReturn({
      where: { ...webhooksOf(actor), id: current.id, enabled: current.enabled, url: current.url },
      data: write,
    });
    if (!updated) throw new DecideAgain("the webhook changed since it was read");
    return updated;
  });
}

export async function deleteWebhook(deps: Deps, actor: KeyActor, id: unknown) {
  const { count } = await deps.prisma.webhook.deleteMany({ where: { ...webhooksOf(actor), id: typeof id === "string" ? id : "" } });
  if (!count) throw new WebhookNotFound();
  return { id: id as string };
}

/** What rotating a secret refuses with, besides bad credentials: REST and GraphQL list these. */
export const ROTATE_SECRET_ERRORS = [WebhookNotFound, InvalidRequest];

/**
 * The new secret signs from now on; the one it replaces keeps verifying for 7 days. A
 * rotation during a transition drops the oldest secret and starts a new 7 days, counted from the
 * database's clock like every stored expiry: the serving gateway's own lengthened or shortened
 * the overlap by as much as it was off (docs/operations.md, "Clocks").
 */
export async function rotateWebhookSecret(deps: Deps, actor: KeyActor, id: unknown) {
  const webhook = await findWebhook(deps, actor, id);
  const secret = generateWebhookSecret();
  // Conditional on the secret we read, so two concurrent rotations cannot both keep "their"
  // previous secret: the loser is told the webhook changed and can rotate again.
  const [rotated] = await deps.prisma.$queryRaw<{ ends: Date }[]>`
    UPDATE webhooks SET secret_sealed = ${seal(deps.master, secret)}, previous_secret_sealed = secret_sealed,
      previous_secret_expires_at = (now() + make_interval(secs => ${TRANSITION_MS / 1000}::int)) AT TIME ZONE 'UTC', updated_at = now() AT TIME ZONE 'UTC'
    WHERE project_id = ${webhooksOf(actor).projectId} AND id = ${webhook.id} AND secret_sealed = ${webhook.secretSealed}
    RETURNING previous_secret_expires_at AS ends`;
  if (!rotated) {
    // Deleted meanwhile: say so (WebhookNotFound), not that rotating again would help.
    await findWebhook(deps, actor, webhook.id);
    throw new InvalidRequest("the webhook was rotated concurrently; try again");
  }
  return { webhookId: webhook.id, newSecret: secret, transitionEndsAt: rotated.ends };
}

/** What sending a test event refuses with, besides bad credentials: its GraphQL field lists these. */
export const SEND_TEST_ERRORS = [WebhookNotFound, InvalidEventType, RateLimited];

/**
 * Test events a project may send in 10 minutes, to all its webhooks together. Each is an event
 * and a delivery kept as long as real ones (docs/operations.md, "Retention"), retried until its
 * endpoint takes it, and sent from the workers every project shares: unbounded, one secret key
 * could fill the tables and the queue. 100 is far more than someone trying out an endpoint
 * sends (docs/security.md, "Abuse limits").
 */
export const TEST_EVENTS_PER_PROJECT: Limit = { max: 100, windowSeconds: 600 };

/** Queues a sample event of any type for this one webhook, marked `test: true`. */
export async function sendTestWebhook(deps: Deps, actor: KeyActor, webhookId: unknown, eventType: unknown) {
  const webhook = await findWebhook(deps, actor, webhookId);
  const type = typeof eventType === "string" ? canonicalEventType(eventType) : undefined;
  if (!type) throw new InvalidEventType(`unknown event type: ${clip(String(eventType), 100)}`);
  const { projectId } = webhook;
  await consumePerProject(deps.db, "test_events_per_project", projectId, TEST_EVENTS_PER_PROJECT);
  const eventId = await transaction(deps.prisma, (tx) =>
    enqueue(tx, { projectId, eventType: type, data: sampleEventData(projectId, type), test: { webhookId: webhook.id } }),
  );
  return { eventId, webhookId: webhook.id, eventType: type };
}
