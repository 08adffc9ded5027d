// The orchestrator's side of the child processes that send, as deployed: starting them (each
// runs bench/delivery/child.ts), reading the JSON lines they report, and stopping them.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { ChildReport, Ctx } from "./shared.ts";

/** The program each child runs; it is given its mode as `--child=<mode>`. */
const CHILD = fileURLToPath(new URL("./child.ts", import.meta.url));

export type ChildMode = "ours" | "gw" | "bare" | "pglite";
export type Child = { proc: ChildProcess; nextReport: <T = ChildReport>() => Promise<T>; send: (line: string) => void; stop: () => Promise<ChildReport> };

/**
 * Starts bench/delivery/child.ts in a child process in `mode`; resolves once it prints "ready". A child prints
 * its reports as JSON lines: nextReport() waits for the next one; stop() ends its stdin, sends
 * SIGTERM, waits for it to exit (SIGKILL after 15 s) and returns its last report.
 */
export async function spawnChild(mode: ChildMode, env: Record<string, string>): Promise<Child> {
  // BENCH_CHILD_NODE_ARGS: extra node flags for the children, e.g. "--cpu-prof --cpu-prof-dir=tmp/prof".
  const extra = process.env.BENCH_CHILD_NODE_ARGS?.split(" ").filter(Boolean) ?? [];
  const proc = spawn(process.execPath, [...extra, "--import", "tsx", CHILD, `--child=${mode}`], {
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const reports: ChildReport[] = [];
  const waiting: ((r: never) => void)[] = [];
  let buffered = "";
  let ready!: () => void;
  const started = new Promise<void>((resolve) => (ready = resolve));
  proc.stdout!.on("data", (d: Buffer) => {
    buffered += d.toString();
    let nl: number;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, nl).trim();
      buffered = buffered.slice(nl + 1);
      if (line === "ready") ready();
      else if (line.startsWith("{")) {
        const report = JSON.parse(line);
        reports.push(report);
        waiting.shift()?.(report as never);
      }
    }
  });
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  await Promise.race([started, exited.then((code) => Promise.reject(new Error(`bench ${mode} child exited with ${code}`)))]);
  return {
    proc,
    nextReport: <T,>() => new Promise<T>((resolve) => waiting.push(resolve as (r: never) => void)),
    send: (line) => void proc.stdin!.write(`${line}\n`),
    async stop() {
      if (proc.exitCode === null) {
        proc.stdin!.end();
        proc.kill("SIGTERM");
      }
      const timer = setTimeout(() => proc.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(timer);
      return reports[reports.length - 1] ?? { cpuUs: NaN, events: 0 };
    },
  };
}

export async function stopAll(children: Child[]): Promise<ChildReport[]> {
  return Promise.all(children.splice(0).map((c) => c.stop()));
}

export const childEnv = (ctx: Ctx, more: Record<string, string> = {}) => ({
  BENCH_MASTER_KEY: ctx.masterKey.raw.toString("base64"),
  BENCH_RECEIVER_URL: ctx.receiver.url.replace(/\/hook$/, "/warmup"),
  ...more,
});

export async function spawnMany(count: number, mode: ChildMode, env: (i: number) => Record<string, string>): Promise<Child[]> {
  const children: Child[] = [];
  try {
    // One at a time: their warm-ups would otherwise compete with each other.
    for (let i = 0; i < count; i++) children.push(await spawnChild(mode, env(i)));
  } catch (err) {
    await stopAll(children);
    throw err;
  }
  return children;
}
