// A command of the built server (test/support/server-entry.ts) started as npm would start it, with
// only the environment a test gives it (and PATH): its output collected, its end awaited, and
// a wait for a line it prints.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import path from "node:path";
import { PassThrough } from "node:stream";
import { runCli } from "../../src/cli/program.ts";

const ROOT = path.resolve(import.meta.dirname, "../..");

export type Started = {
  child: ChildProcessWithoutNullStreams;
  closed: Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** Resolves once stdout has said `text`; rejects if the process ends first. */
  said(text: string): Promise<void>;
};

/** `args` after node (an entry and its arguments), from the checkout, PORT 0 unless `env` says. */
export function startCommand(args: string[], env: Record<string, string>): Started {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { PATH: process.env.PATH ?? "", PORT: "0", ...env }, stdio: ["pipe", "pipe", "pipe"] });
  child.stdin.end();
  const out = { stdout: "", stderr: "" };
  let onOutput = () => {};
  child.stdout.on("data", (c) => ((out.stdout += c), onOutput()));
  child.stderr.on("data", (c) => (out.stderr += c));
  const closed = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => child.on("close", (code) => resolve({ code, ...out })));
  const said = (text: string) =>
    new Promise<void>((resolve, reject) => {
      onOutput = () => out.stdout.includes(text) && resolve();
      onOutput();
      void closed.then((r) => reject(new Error(`exited ${r.code} before saying ${text}:\n${r.stderr}`)));
    });
  return { child, closed, said };
}

/**
 * A command line of the admin CLI through runCli, what bin/linkgate.mjs calls, in this process,
 * its output captured as a pipe would: no PGlite opened again in WebAssembly by a new process.
 */
export async function runCliHere(env: NodeJS.ProcessEnv, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const captured = () => {
    const stream = new PassThrough();
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    return { stream, text: () => Buffer.concat(chunks).toString("utf8") };
  };
  const stdout = captured();
  const stderr = captured();
  const code = await runCli(args, { env, stdout: stdout.stream, stderr: stderr.stream });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}
