// A second linkgate process on a harness's Postgres database, the way production runs many:
// `npm start`'s entry in a child process with the same database, master key and issuer, listening on
// a loopback port. Races "across processes" are run between the harness's app and this one.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Agent } from "undici";
import type { Harness } from "./app.ts";
import { MAIN } from "./server-entry.ts";

export type SecondProcess = {
  /** http://127.0.0.1:<port> */
  url: string;
  fetch(pathAndQuery: string, init?: RequestInit): Promise<Response>;
  close(): Promise<void>;
};

export async function startSecondProcess(h: Harness, env: Record<string, string> = {}): Promise<SecondProcess> {
  if (!h.db.url) throw new Error("a second process needs the harness on Postgres");
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH,
      HOST: "127.0.0.1",
      PORT: "0",
      DATABASE_URL: h.db.url,
      LINKGATE_SECRET_KEY: h.config.secretKey!,
      LINKGATE_DATA_DIR: mkdtempSync(path.join(tmpdir(), "linkgate-second-")),
      LINKGATE_WORKER: "0",
      LOG_LEVEL: "info",
      ...(h.config.issuer ? { LINKGATE_ISSUER: h.config.issuer } : {}),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let output = "";
  // The listening line carries the port; the process is ready to serve once it is printed.
  const port = await new Promise<number>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk;
      const m = /"port":(\d+)/.exec(output);
      if (m) {
        child.stdout.off("data", onData);
        resolve(Number(m[1]));
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", (c) => (output += c));
    child.once("exit", (code) => reject(new Error(`the second linkgate exited (${code}) before listening:\n${output}`)));
  });
  child.stdout.resume();
  const url = `http://127.0.0.1:${port}`;
  // Connections of their own, ended before the SIGTERM: a draining gateway waits for an idle
  // keep-alive connection until its client ends it, which fetch's shared pool did some 3 s
  // after its last request (docs/configuration.md, "Shutdown"; test/ops.shutdown.test.ts).
  const connections = new Agent();
  return {
    url,
    fetch: (p, init) => fetch(`${url}${p}`, { ...init, dispatcher: connections } as RequestInit),
    async close() {
      await connections.close();
      child.kill("SIGTERM");
      await exited;
    },
  };
}
