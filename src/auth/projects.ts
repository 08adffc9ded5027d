// Projects and their API keys. A key is shown once; only its SHA-256 is stored (keys are 32
// random bytes, so a fast hash is as safe as a slow one and keeps lookups to one index probe).
import type { Db } from "../db/client.ts";
import { randomToken, sha256Hex } from "../crypto.ts";
import { NotFound } from "../errors.ts";
import { newId } from "../ids.ts";

export function newApiKey(): string {
  return `lg_${randomToken(32)}`;
}

async function storeKey(db: Db, projectId: string, key: string) {
  return db.apiKey.create({ data: { id: newId("key"), projectId, keyHash: sha256Hex(key), prefix: key.slice(0, 10) } });
}

export async function createProject(db: Db, name: string) {
  const project = await db.project.create({ data: { id: newId("prj"), name } });
  const apiKey = newApiKey();
  const row = await storeKey(db, project.id, apiKey);
  return { project, apiKey, apiKeyId: row.id };
}

export async function createApiKey(db: Db, projectId: string) {
  if (!(await db.project.count({ where: { id: projectId } }))) throw new NotFound("no such project");
  const apiKey = newApiKey();
  const row = await storeKey(db, projectId, apiKey);
  return { apiKey, apiKeyId: row.id, projectId };
}

export async function revokeApiKey(db: Db, id: string) {
  const { count } = await db.apiKey.updateMany({ where: { id, revokedAt: null }, data: { revokedAt: new Date() } });
  if (!count) throw new NotFound("no such API key");
}

export async function projectIdForKey(db: Db, key: string): Promise<string | null> {
  const row = await db.apiKey.findUnique({ where: { keyHash: sha256Hex(key) }, select: { projectId: true, revokedAt: true } });
  return row && !row.revokedAt ? row.projectId : null;
}

/**
 * LINKGATE_BOOTSTRAP_API_KEY makes sure a project named `default` holds that key (idempotent);
 * without it, a first start on an empty database creates a project and returns its key once.
 */
export async function bootstrapProject(db: Db, bootstrapKey: string | undefined): Promise<{ apiKey: string; projectId: string } | null> {
  if (bootstrapKey) {
    if (await projectIdForKey(db, bootstrapKey)) return null;
    const existing = await db.project.findFirst({ where: { name: "default" }, orderBy: { createdAt: "asc" } });
    const project = existing ?? (await db.project.create({ data: { id: newId("prj"), name: "default" } }));
    await storeKey(db, project.id, bootstrapKey);
    return null;
  }
  if (await db.project.count()) return null;
  const { project, apiKey } = await createProject(db, "default");
  return { apiKey, projectId: project.id };
}
