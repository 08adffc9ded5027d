// The caller a transport hands a service: a project acting through a real key of its own.
import { createApiKey } from "../../src/auth/projects.ts";
import type { Database } from "../../src/db/client.ts";
import type { KeyActor, KeyKind } from "../../src/deps.ts";

/** The project, through a new key of that kind: the actor authenticateProject gives for it. */
export async function keyActor(db: Pick<Database, "prisma">, projectId: string, kind: KeyKind = "secret"): Promise<KeyActor> {
  const { apiKeyId } = await createApiKey(db.prisma, projectId, kind);
  return { projectId, keyKind: kind, clientAddress: "127.0.0.1", apiKeyId };
}
