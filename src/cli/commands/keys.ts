import { Option, type Command } from "commander";
import { createApiKey, keyPrefix, revokeApiKey } from "../../auth/projects.ts";
import type { Db } from "../../db/client.ts";
import type { KeyKind } from "../../deps.ts";
import { idOf } from "../args.ts";
import { assertProjectListed, CliFailure, withDatabase } from "../database.ts";
import { emit, note, table, unprinted, when, type Io } from "../output.ts";

// Never the hash: select exactly what may be shown.
const shown = { id: true, projectId: true, kind: true, prefix: true, createdAt: true, revokedAt: true } as const;
type KeyRow = { id: string; projectId: string; kind: string; prefix: string; createdAt: Date; revokedAt: Date | null };

export function registerKeys(program: Command, io: Io): void {
  const keys = program.command("keys").description("create, list and revoke API keys");

  keys
    .command("create")
    .description("create an API key for a project (printed once)")
    .requiredOption("--project <id>", "the project (required)", idOf("prj"))
    .addOption(new Option("--kind <kind>", "secret (lg_sk_…, servers) or publishable (lg_pk_…, front-end apps) (required)").choices(["secret", "publishable"]).makeOptionMandatory())
    .option("--json", "print JSON")
    .action(async (opts: { project: string; kind: KeyKind; json?: boolean }) => {
      const created = await withDatabase(io.env, (db) => createApiKey(db.prisma, opts.project, opts.kind));
      const data = { id: created.apiKeyId, projectId: created.projectId, kind: created.kind, key: created.apiKey };
      await unprinted(
        emit(io, !!opts.json, data, () =>
          table(
            [
              { head: "ID", value: () => data.id },
              { head: "PROJECT", value: () => data.projectId },
              { head: "KIND", value: () => data.kind },
              { head: "KEY", value: () => data.key },
            ],
            [data],
          ),
        ),
        (why) => `${why}: key ${data.id} was created and never shown; revoke it (\`linkgate keys revoke ${data.id}\`) and create another`,
      );
      note(io, "Store this key now: only its hash is kept, and it is never shown again.");
    });

  keys
    .command("list")
    .description("list API keys (their prefixes, never the keys)")
    .option("--project <id>", "only this project's keys", idOf("prj"))
    .option("--json", "print JSON")
    .action(async (opts: { project?: string; json?: boolean }) => {
      const rows: KeyRow[] = await withDatabase(io.env, async (db) =>
        assertProjectListed(
          db,
          opts.project,
          (await db.prisma.apiKey.findMany({ where: opts.project ? { projectId: opts.project } : {}, select: shown, orderBy: [{ createdAt: "asc" }, { id: "asc" }] })).map(recognisable),
        ),
      );
      await emit(io, !!opts.json, rows, () =>
        table<KeyRow>(
          [
            { head: "ID", value: (k) => k.id },
            { head: "PROJECT", value: (k) => k.projectId },
            { head: "KIND", value: (k) => k.kind },
            { head: "PREFIX", value: (k) => `${k.prefix}…` },
            { head: "CREATED", value: (k) => when(k.createdAt) },
            { head: "STATUS", value: (k) => (k.revokedAt ? `revoked ${when(k.revokedAt)}` : "active") },
          ],
          rows,
        ),
      );
    });

  keys
    .command("revoke")
    .description("revoke an API key; requests with it fail from now on")
    .argument("<id>", "the key's id (key_…, from `keys list`)", idOf("key"))
    .option("--json", "print JSON")
    .action(async (id: string, opts: { json?: boolean }) => {
      const row = await withDatabase(io.env, (db) => revoke(db.prisma, id));
      await emit(io, !!opts.json, row, () => `revoked ${row.id} (${row.kind} key ${row.prefix}… of ${row.projectId})`);
    });
}

async function revoke(prisma: Db, id: string): Promise<KeyRow> {
  const before = await prisma.apiKey.findUnique({ where: { id }, select: shown });
  if (before?.revokedAt) throw new CliFailure(`key ${id} was already revoked at ${when(before.revokedAt)}`);
  await revokeApiKey(prisma, id);
  return recognisable(await prisma.apiKey.findUniqueOrThrow({ where: { id }, select: shown }));
}

/** A row as lists show it: a bootstrap key stored with 10 characters before shows 4 (keyPrefix). */
const recognisable = (k: KeyRow): KeyRow => ({ ...k, prefix: keyPrefix(k.prefix) });
