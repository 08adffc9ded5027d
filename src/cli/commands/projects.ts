import type { Command } from "commander";
import { createProject } from "../../auth/projects.ts";
import type { Db } from "../../db/client.ts";
import { parseProjectName } from "../args.ts";
import { withDatabase } from "../database.ts";
import { emit, note, table, unprinted, when, type Io } from "../output.ts";

type ProjectRow = { id: string; name: string; createdAt: Date; secretKeys: number; publishableKeys: number; webhooks: number };

export function registerProjects(program: Command, io: Io): void {
  const projects = program.command("projects").description("create and list projects");

  projects
    .command("create")
    .description("create a project with one secret and one publishable key (printed once)")
    .argument("<name>", "the project's name, 1 to 200 characters", parseProjectName)
    .option("--json", "print JSON")
    .action(async (name: string, opts: { json?: boolean }) => {
      const created = await withDatabase(io.env, (db) => createProject(db.prisma, name));
      const keys = [
        { id: created.secretKeyId, kind: "secret", key: created.secretKey },
        { id: created.publishableKeyId, kind: "publishable", key: created.publishableKey },
      ];
      const { id, name: projectName, createdAt } = created.project;
      await unprinted(
        emit(io, !!opts.json, { project: { id, name: projectName, createdAt }, keys }, () =>
          table(
            [
              { head: "PROJECT", value: () => id },
              { head: "NAME", value: () => projectName },
              { head: "KIND", value: (k) => k.kind },
              { head: "KEY ID", value: (k) => k.id },
              { head: "KEY", value: (k) => k.key },
            ],
            keys,
          ),
        ),
        (why) =>
          `${why}: project ${id} was created, and its keys ${keys.map((k) => k.id).join(" and ")} never shown; ` +
          `revoke them (\`linkgate keys revoke <id>\`) and make new ones (\`linkgate keys create --project ${id} --kind secret\`, then publishable)`,
      );
      note(io, "Store these keys now: only their hashes are kept, and they are never shown again.");
    });

  projects
    .command("list")
    .description("list projects with their active keys and webhooks")
    .option("--json", "print JSON")
    .action(async (opts: { json?: boolean }) => {
      const rows = await withDatabase(io.env, (db) => listProjects(db.prisma));
      await emit(io, !!opts.json, rows, () =>
        table<ProjectRow>(
          [
            { head: "ID", value: (p) => p.id },
            { head: "NAME", value: (p) => p.name },
            { head: "CREATED", value: (p) => when(p.createdAt) },
            { head: "SECRET KEYS", value: (p) => String(p.secretKeys) },
            { head: "PUBLISHABLE KEYS", value: (p) => String(p.publishableKeys) },
            { head: "WEBHOOKS", value: (p) => String(p.webhooks) },
          ],
          rows,
        ),
      );
    });
}

async function listProjects(prisma: Db): Promise<ProjectRow[]> {
  const projects = await prisma.project.findMany({ orderBy: [{ createdAt: "asc" }, { id: "asc" }], include: { _count: { select: { webhooks: true } } } });
  const keys = await prisma.apiKey.groupBy({ by: ["projectId", "kind"], where: { revokedAt: null }, _count: { _all: true } });
  const active = (projectId: string, kind: string) => keys.find((k) => k.projectId === projectId && k.kind === kind)?._count._all ?? 0;
  return projects.map((p) => ({
    id: p.id,
    name: p.name,
    createdAt: p.createdAt,
    secretKeys: active(p.id, "secret"),
    publishableKeys: active(p.id, "publishable"),
    webhooks: p._count.webhooks,
  }));
}
