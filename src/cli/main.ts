// Entry point of `linkgate` (bin/linkgate.mjs) and of `npm run cli -- <command>`.
import { runCli } from "./program.ts";
import { processIo } from "./output.ts";

const code = await runCli(process.argv.slice(2), processIo());
// Exit explicitly once the command is done: Prisma's WASM schema engine leaves a 10 s timer
// behind after migrating, which would otherwise keep `db migrate` alive for 10 s more. Pipes
// are asynchronous on some systems (macOS), so let stdout and stderr drain first.
const drained = (stream: NodeJS.WriteStream) => new Promise<void>((resolve) => stream.write("", () => resolve()));
await Promise.all([drained(process.stdout), drained(process.stderr)]);
process.exit(code);
