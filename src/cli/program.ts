// `linkgate <command>`: the admin CLI. It works on the database `npm start` uses (see
// database.ts). Exit codes: 0 done, 1 the command failed (e.g. no such project, database
// unreachable), 2 a usage error (unknown command or option, missing or invalid value).
import { readFileSync } from "node:fs";
import { Command, CommanderError } from "commander";
import { ConfigError } from "../config.ts";
import { DomainError } from "../errors.ts";
import { registerDb } from "./commands/db.ts";
import { registerDeliveries } from "./commands/deliveries.ts";
import { registerKeys } from "./commands/keys.ts";
import { registerProjects } from "./commands/projects.ts";
import { registerWebhooks } from "./commands/webhooks.ts";
import { CliFailure } from "./database.ts";
import { OutputFailure, type Io } from "./output.ts";

export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

const version = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;

export function buildProgram(io: Io): Command {
  const program = new Command("linkgate")
    .description("Administer linkgate: projects, API keys, webhooks, deliveries and the database.\nUses DATABASE_URL (Postgres) when set, otherwise the PGlite database in LINKGATE_DATA_DIR (default ./.data).")
    .version(version)
    // Set before the subcommands are added, which inherit them.
    .exitOverride()
    .configureOutput({ writeOut: (s) => void io.stdout.write(s), writeErr: (s) => void io.stderr.write(s) })
    .showSuggestionAfterError(true);
  registerProjects(program, io);
  registerKeys(program, io);
  registerWebhooks(program, io);
  registerDeliveries(program, io);
  registerDb(program, io);
  return program;
}

/**
 * An option that takes a value, given twice, is a usage error: commander keeps the last one, so
 * `keys create --project A --project B` quietly acted on B (fourteenth review).
 */
function refuseRepeatedOptions(action: Command, args: string[]): void {
  for (const option of action.options) {
    if (!option.long || !(option.required || option.optional)) continue;
    const given = args.filter((a) => a === option.long || a.startsWith(`${option.long}=`)).length;
    if (given > 1) action.error(`error: option '${option.flags}' given more than once`, { exitCode: EXIT_USAGE, code: "linkgate.repeatedOption" });
  }
}

/** Runs one command line (without `node` and the script) and returns the exit code. */
export async function runCli(args: string[], io: Io): Promise<number> {
  // A write that fails says so to its callback (emit); its 'error' event, unheard, would end the
  // process with a stack trace, the key a command just created unprinted (docs/cli.md).
  for (const stream of [io.stdout, io.stderr]) stream.on("error", () => {});
  try {
    await buildProgram(io)
      .hook("preAction", (_, action) => refuseRepeatedOptions(action, args))
      .parseAsync(args, { from: "user" });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Commander has already printed the error (or the help or version asked for).
      return err.exitCode === 0 ? 0 : EXIT_USAGE;
    }
    io.stderr.write(`error: ${describe(err)}\n`);
    return EXIT_FAILED;
  }
}

function describe(err: unknown): string {
  if (err instanceof CliFailure || err instanceof OutputFailure || err instanceof DomainError || err instanceof ConfigError) return oneLine(err.message);
  const code = (err as { code?: unknown }).code;
  // Prisma: a table of this version is missing (migrations not applied, or a foreign database).
  if (code === "P2021") return "the database has no linkgate tables: run `linkgate db migrate` first";
  // A refused connection to "localhost" reaches us as an AggregateError with an empty message.
  if (err instanceof AggregateError && !err.message) return oneLine(err.errors.map((e) => (e as Error).message).join("; "));
  return oneLine(err instanceof Error ? err.message || String(code ?? err.name) : String(err));
}

const oneLine = (s: string) => s.replace(/\s*\n\s*/g, "; ").trim();
