// What commands print: a table for people, or JSON (`--json`) for scripts. Data goes to stdout;
// notes meant for a person (such as "shown only once") go to stderr, so stdout stays parseable.
import Table from "cli-table3";

export type Io = {
  env: NodeJS.ProcessEnv;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
};

export const processIo = (): Io => ({ env: process.env, stdout: process.stdout, stderr: process.stderr });

export type Column<T> = { head: string; value: (row: T) => string };

export function table<T>(columns: Column<T>[], rows: T[]): string {
  // No colours: they would end up as escape codes in files and pipes.
  const t = new Table({ head: columns.map((c) => c.head), style: { head: [], border: [] } });
  for (const row of rows) t.push(columns.map((c) => c.value(row)));
  return t.toString();
}

/** stdout could not take a command's output: a closed pipe (`| head`), a full disk. */
export class OutputFailure extends Error {}

/**
 * Prints `data` as JSON with `--json`, else the table (or text) that `human` renders, and waits
 * until stdout has taken it. A stdout that cannot (a reader that went away, a full disk) ended
 * the process with a stack trace (docs/cli.md: every error is one line on stderr), and a key
 * created just before was lost without a word: the command now fails with OutputFailure.
 */
export function emit(io: Io, json: boolean, data: unknown, human: () => string): Promise<void> {
  const text = json ? `${JSON.stringify(data, null, 2)}\n` : `${human()}\n`;
  return new Promise((resolve, reject) =>
    io.stdout.write(text, (err) => (err ? reject(new OutputFailure(`could not write the output: ${err.message}`)) : resolve())),
  );
}

/** The output of a command that made a key, which exists from now on: a failure to print it says which key to revoke. */
export async function unprinted(printing: Promise<void>, say: (why: string) => string): Promise<void> {
  try {
    await printing;
  } catch (err) {
    throw err instanceof OutputFailure ? new OutputFailure(say(err.message)) : err;
  }
}

export function note(io: Io, text: string): void {
  io.stderr.write(`${text}\n`);
}

/** Dates in tables: ISO 8601 to the second, UTC. */
export const when = (d: Date | null | undefined): string => (d ? d.toISOString().replace(/\.\d{3}Z$/, "Z") : "");

/**
 * A URL as lists show it: scheme, host, port and path, with every query value, a fragment and any
 * user or password replaced by `***`. Receivers that cannot check a signature often take a token
 * in the query (https://x.example/hook?token=…), and `webhooks list` printed it whole to anyone
 * reading a terminal, a pasted ticket or a CI log; docs/cli.md says secrets are never shown.
 * Parameter names stay, so URLs can still be told apart. A token in the path is not recognisable
 * as one and stays (docs/cli.md, `webhooks list`).
 */
export function maskedUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return "(an unparseable URL)";
  }
  const userinfo = u.username || u.password ? "***@" : "";
  // each `name=value` keeps its name; a part without `=` may be the token itself (`?abc123`)
  const query = u.search
    ? `?${u.search
        .slice(1)
        .split("&")
        .map((part) => {
          const eq = part.indexOf("=");
          if (eq < 0) return part ? "***" : part;
          return eq === part.length - 1 ? part : `${part.slice(0, eq)}=***`;
        })
        .join("&")}`
    : "";
  const hash = u.hash ? "#***" : "";
  return `${u.protocol}//${userinfo}${u.host}${u.pathname}${query}${hash}`;
}
