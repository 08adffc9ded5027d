import type { Command } from "commander";
import { idOf } from "../args.ts";
import { assertProjectListed, withDatabase } from "../database.ts";
import { emit, maskedUrl, table, when, type Io } from "../output.ts";

// Never the sealed secrets.
const shown = { id: true, projectId: true, url: true, events: true, description: true, enabled: true, disabledReason: true, createdAt: true } as const;
type WebhookRow = { id: string; projectId: string; url: string; events: string[]; description: string; enabled: boolean; disabledReason: string | null; createdAt: Date };

const state = (w: WebhookRow) => (w.enabled ? "enabled" : w.disabledReason ? `disabled: ${w.disabledReason}` : "disabled");

export function registerWebhooks(program: Command, io: Io): void {
  const webhooks = program.command("webhooks").description("inspect webhooks");

  webhooks
    .command("list")
    .description("list webhooks, their events and whether they are enabled")
    .option("--project <id>", "only this project's webhooks", idOf("prj"))
    .option("--json", "print JSON")
    .action(async (opts: { project?: string; json?: boolean }) => {
      const rows: WebhookRow[] = await withDatabase(io.env, async (db) =>
        assertProjectListed(
          db,
          opts.project,
          (await db.prisma.webhook.findMany({ where: opts.project ? { projectId: opts.project } : {}, select: shown, orderBy: [{ createdAt: "asc" }, { id: "asc" }] })).map(
            // a receiver's token in the query string is a credential like the secret (maskedUrl)
            (w) => ({ ...w, url: maskedUrl(w.url) }),
          ),
        ),
      );
      await emit(io, !!opts.json, rows, () =>
        table<WebhookRow>(
          [
            { head: "ID", value: (w) => w.id },
            { head: "PROJECT", value: (w) => w.projectId },
            { head: "URL", value: (w) => w.url },
            { head: "EVENTS", value: (w) => w.events.join("\n") },
            { head: "STATE", value: state },
            { head: "CREATED", value: (w) => when(w.createdAt) },
          ],
          rows,
        ),
      );
    });
}
