import { Option, type Command } from "commander";
import { SingleBar, Presets } from "cli-progress";
import { idOf, parsePositiveInt, parseSince } from "../args.ts";
import { withDatabase } from "../database.ts";
import { countReplayable, findReplayTarget, replayInBatches } from "../../delivery/redelivery.ts";
import { emit, note, type Io } from "../output.ts";

const WHEN_ENABLED = "they are sent once it is enabled (updateWebhook with enabled: true)";

type ReplayOptions = { webhook: string; since: Date; batchSize: number; progress?: boolean; json?: boolean };

export function registerDeliveries(program: Command, io: Io): void {
  const deliveries = program.command("deliveries").description("act on webhook deliveries");

  deliveries
    .command("replay")
    .description("send a webhook's failed deliveries again")
    .requiredOption("--webhook <id>", "the webhook (required)", idOf("wh"))
    .requiredOption("--since <time>", "replay deliveries created at or after this time (required): 2026-11-20T09:30:00Z, 2026-11-20 (UTC midnight), or back from now: 90m, 24h, 7d", (v: string) => parseSince(v))
    .addOption(new Option("--batch-size <n>", "deliveries reset per statement").default(1000).argParser(parsePositiveInt(100_000)))
    .option("--progress", "show the progress bar even when stderr is not a terminal")
    .option("--json", "print JSON")
    .action(async (opts: ReplayOptions) => {
      let paused = false;
      const result = await withDatabase(io.env, async (db) => {
        const target = await findReplayTarget(db, opts.webhook, opts.since);
        const total = await countReplayable(db, target);
        const bar = progressBar(io, total, opts);
        try {
          const replayed = await replayInBatches(db, target, {
            batchSize: opts.batchSize,
            onProgress: bar ? (n) => advance(bar, n) : undefined,
          });
          // A disabled webhook's deliveries stay pending until it is enabled (docs/cli.md): "a
          // running worker sends them now" sent an operator to look for deliveries that never went out.
          paused = replayed > 0 && !(await db.prisma.webhook.findUnique({ where: { id: target.webhookId }, select: { enabled: true } }))?.enabled;
          return { webhookId: target.webhookId, projectId: target.projectId, since: target.since, replayed };
        } finally {
          bar?.stop();
        }
      });
      const sending = paused ? `the webhook is disabled: ${WHEN_ENABLED}` : "a running worker sends them now";
      await emit(io, !!opts.json, result, () =>
        result.replayed
          ? `replayed ${result.replayed} failed deliveries of ${result.webhookId} since ${result.since.toISOString()}; ${sending}`
          : `no failed deliveries of ${result.webhookId} since ${result.since.toISOString()}`,
      );
      if (paused && opts.json) note(io, `The webhook ${result.webhookId} is disabled: ${WHEN_ENABLED}.`);
    });
}

// Failures recorded while the replay runs can push the count past the first estimate.
function advance(bar: SingleBar, replayed: number): void {
  if (replayed > bar.getTotal()) bar.setTotal(replayed);
  bar.update(replayed);
}

/** A bar when more than one batch is to be reset, on a terminal (or when asked for). */
function progressBar(io: Io, total: number, opts: ReplayOptions): SingleBar | null {
  const wanted = opts.progress || (io.stderr.isTTY && total > opts.batchSize);
  if (!wanted || total === 0) return null;
  const bar = new SingleBar(
    { stream: io.stderr as NodeJS.WriteStream, noTTYOutput: !!opts.progress, format: "replaying [{bar}] {percentage}% {value}/{total} deliveries | {duration_formatted}", hideCursor: true },
    Presets.shades_classic,
  );
  bar.start(total, 0);
  return bar;
}
