// Projects and their API keys. A key is shown once; only its SHA-256 is stored (keys are 32
// random bytes, so a fast hash is as safe as a slow one and keeps lookups to one index probe).
// Two kinds, like every hosted auth service: a publishable key (lg_pk_…) that front-end apps
// ship and anyone may read, and a secret key (lg_sk_…) that administers the project.
import { ConfigError } from "../config.ts";
import type { Db, Tx } from "../db/client.ts";
import { takeFirstRunTurn } from "../db/locks.ts";
import { transaction } from "../db/transaction.ts";
import { deriveKey, randomToken, sha256Hex, type MasterKey } from "../crypto.ts";
import { createHmac } from "node:crypto";
import type { KeyKind } from "../deps.ts";
import { InvalidRequest, NotFound } from "../errors.ts";
import { newId } from "../ids.ts";
import { charLength, nameText, unshowable } from "../text.ts";

const PREFIX: Record<KeyKind, string> = { secret: "lg_sk_", publishable: "lg_pk_" };

export function newApiKey(kind: KeyKind): string {
  return `${PREFIX[kind]}${randomToken(32)}`;
}

async function storeKey(db: Db | Tx, projectId: string, key: string, kind: KeyKind) {
  return db.apiKey.create({ data: { id: newId("key"), projectId, keyHash: sha256Hex(key), prefix: keyPrefix(key), kind } });
}

/**
 * What lists show of a key to recognise it (docs/cli.md): a generated key's kind and 4 of its 43
 * random characters. A bootstrap key is the operator's own text, as short as 16 characters, and
 * its first 10 were most of it: 4 only. Applied to a stored prefix too, for rows stored before.
 */
export function keyPrefix(key: string): string {
  return key.startsWith(PREFIX.secret) || key.startsWith(PREFIX.publishable) ? key.slice(0, 10) : key.slice(0, 4);
}

export type NewProject = { project: { id: string; name: string; createdAt: Date }; secretKey: string; secretKeyId: string; publishableKey: string; publishableKeyId: string };

/** A project's name as given, trimmed: 1 to 200 characters, or InvalidRequest. */
export function projectName(given: string): string {
  // counted in characters as people count them, in NFC (src/text.ts; docs/cli.md)
  const name = nameText(given);
  if (!name || charLength(name) > 200) throw new InvalidRequest("name must be 1 to 200 characters");
  // `projects list` prints names to an operator's terminal, where an escape sequence in one would
  // be run (fourteenth review), and the dashboard shows them: held to the rule of every name
  // shown to others (src/text.ts)
  const why = unshowable(name);
  if (why) throw new InvalidRequest(`name ${why}`);
  return name;
}

export async function createProject(db: Db | Tx, givenName: string): Promise<NewProject> {
  const project = await db.project.create({ data: { id: newId("prj"), name: projectName(givenName) } });
  const secretKey = newApiKey("secret");
  const publishableKey = newApiKey("publishable");
  const [secret, publishable] = [await storeKey(db, project.id, secretKey, "secret"), await storeKey(db, project.id, publishableKey, "publishable")];
  return { project, secretKey, secretKeyId: secret.id, publishableKey, publishableKeyId: publishable.id };
}

export async function createApiKey(db: Db, projectId: string, kind: KeyKind) {
  if (!(await db.project.count({ where: { id: projectId } }))) throw new NotFound("no such project");
  const apiKey = newApiKey(kind);
  const row = await storeKey(db, projectId, apiKey, kind);
  return { apiKey, apiKeyId: row.id, projectId, kind };
}

export async function revokeApiKey(db: Db, id: string) {
  const { count } = await db.apiKey.updateMany({ where: { id, revokedAt: null }, data: { revokedAt: new Date() } });
  if (!count) throw new NotFound("no such API key");
}

/** The kind of an unrevoked key, or null when no project holds it. */
export async function activeKeyKind(db: Db, key: string): Promise<KeyKind | null> {
  const row = await db.apiKey.findFirst({ where: { keyHash: sha256Hex(key), revokedAt: null }, select: { kind: true } });
  return row?.kind ?? null;
}

/**
 * Whether a project holds the key. A revoked one stops the start with one line: storing it
 * again broke the key hash's uniqueness (every start after `keys revoke` crashed with a stack
 * trace: fourteenth review), and quietly making it valid again would undo the revocation.
 */
async function keyExists(db: Db | Tx, key: string, setting: string): Promise<boolean> {
  const row = await db.apiKey.findFirst({ where: { keyHash: sha256Hex(key) }, select: { revokedAt: true } });
  if (row?.revokedAt) throw new ConfigError(`${setting} names a key that was revoked: unset it (or set a new key) and start again`);
  return !!row;
}

export type BootstrapKeys = { secret?: string; publishable?: string };

/** What a first start made: the project `default` and its keys, to be shown once. */
export type FirstProject = { projectId: string; publishableKey: string; secretKey?: string };

/**
 * LINKGATE_BOOTSTRAP_API_KEY / LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY make sure a project named
 * `default` holds those keys (idempotent); without either, a first start on an empty database
 * creates a project and returns its keys once: both, or with `secretKey: false` (production,
 * where a start's output is the log, and no secret belongs in a log) the publishable key only;
 * the operator then makes the secret key with the CLI, which prints it to their terminal.
 */
export async function bootstrapProject(db: Db, keys: BootstrapKeys, opts: { secretKey: boolean }): Promise<FirstProject | null> {
  // in the first-run turn (src/db/locks.ts): of servers starting at once, one creates, the others find
  return transaction(db, async (tx) => {
    await takeFirstRunTurn(tx);
    return bootstrapInTurn(tx, keys, opts);
  });
}

async function bootstrapInTurn(db: Tx, keys: BootstrapKeys, opts: { secretKey: boolean }): Promise<FirstProject | null> {
  const wanted = (
    [
      ["secret", keys.secret],
      ["publishable", keys.publishable],
    ] as const
  ).filter((k): k is readonly [KeyKind, string] => !!k[1]);
  if (wanted.length) {
    for (const [kind, key] of wanted) {
      if (await keyExists(db, key, kind === "secret" ? "LINKGATE_BOOTSTRAP_API_KEY" : "LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY")) continue;
      const existing = await db.project.findFirst({ where: { name: "default" }, orderBy: { createdAt: "asc" } });
      const project = existing ?? (await db.project.create({ data: { id: newId("prj"), name: "default" } }));
      await storeKey(db, project.id, key, kind);
    }
    return null;
  }
  if (await db.project.count()) return null;
  if (opts.secretKey) {
    const { project, publishableKey, secretKey } = await createProject(db, "default");
    return { projectId: project.id, publishableKey, secretKey };
  }
  const project = await db.project.create({ data: { id: newId("prj"), name: "default" } });
  const publishableKey = newApiKey("publishable");
  await storeKey(db, project.id, publishableKey, "publishable");
  return { projectId: project.id, publishableKey };
}

/**
 * The hosted pages' publishable key in development, when none is configured: a publishable key
 * of the project named `default`, derived from the master key and the project id. Only hashes of
 * keys are stored, so an existing key cannot be read back; this one can be recomputed on every
 * start instead, and is stored (once) as the project's key like any other. A publishable key is
 * public anyway: it ships in every front end (docs/configuration.md, LINKGATE_PAGES_PUBLISHABLE_KEY).
 * Null without a `default` project, or once the key has been revoked: revoking it is how an
 * operator stops the pages from using it.
 */
export async function developmentPagesKey(db: Db, master: MasterKey): Promise<{ key: string; projectId: string } | null> {
  const project = await db.project.findFirst({ where: { name: "default" }, orderBy: { createdAt: "asc" }, select: { id: true } });
  if (!project) return null;
  const mac = createHmac("sha256", deriveKey(master, "hosted-pages-publishable-key")).update(project.id).digest("base64url");
  const key = `${PREFIX.publishable}${mac}`;
  const keyHash = sha256Hex(key);
  // Two processes may start at once on one database: the unique hash lets only one row in.
  await db.apiKey.createMany({ data: [{ id: newId("key"), projectId: project.id, keyHash, prefix: keyPrefix(key), kind: "publishable" }], skipDuplicates: true });
  const row = await db.apiKey.findUnique({ where: { keyHash }, select: { revokedAt: true } });
  return row && !row.revokedAt ? { key, projectId: project.id } : null;
}
