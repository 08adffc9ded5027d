// A project's webhooks and their events written straight into the database, for the tests that
// count what a statement reads from a log of thousands (a log that long is too slow to make
// through the worker).
import type { KeyActor } from "../../src/deps.ts";
import { keyActor } from "./actors.ts";
import type { TestDatabase } from "./db.ts";

/** A project, and the actor of a secret key of its own. */
export async function storedProject(db: TestDatabase, projectId: string, name: string): Promise<KeyActor> {
  await db.prisma.project.create({ data: { id: projectId, name } });
  return keyActor(db, projectId);
}

/** A webhook of the project, as the service stores one (its sealed secret is never opened here). */
export async function storedWebhook(db: TestDatabase, projectId: string, webhookId: string, opts: { enabled?: boolean; events?: string[] } = {}): Promise<void> {
  await db.prisma.$executeRaw`
    INSERT INTO webhooks (id, project_id, url, secret_sealed, enabled, events)
    VALUES (${webhookId}, ${projectId}, 'https://example.com/hook', 'sealed', ${opts.enabled ?? false}, ${opts.events ?? null}::text[])`;
}

/** `n` user.updated events of the project, `<prefix>_e1` to `<prefix>_e<n>`, a second apart from `daysAgo` days ago. */
export async function storedEvents(db: TestDatabase, projectId: string, prefix: string, n: number, daysAgo = 3): Promise<void> {
  await db.prisma.$executeRaw`
    INSERT INTO outbox_events (id, project_id, event_type, body, created_at)
    SELECT ${prefix} || '_e' || k, ${projectId}, 'user.updated', '{}', now() - ${daysAgo}::int * interval '1 day' + k * interval '1 second'
    FROM generate_series(1, ${n}::int) k`;
}
