// One process per PGlite folder (docs/configuration.md, "Embedded PGlite"). PGlite is Postgres
// compiled into the process, with no lock between processes: a second `npm start`, `npm run
// worker` or `npm run db:migrate` on the same folder opened it beside the first, each process
// then working on its own copy in memory and writing over the other's files. PGlite's own
// postmaster.pid says "-42", not who holds the folder, and stays behind after a crash, so it can
// neither name the holder nor tell a crash from a live process.
//
// The lock is a file beside the folder holding the holder's process id, created exclusively.
// One whose process is gone (a crash, a kill -9) is taken over, so a crash never needs a hand to
// clean up. Two processes starting in the same instant after a crash could both take over a
// stale lock; that window is the time between reading and removing it.
import { randomBytes } from "node:crypto";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { ConfigError } from "../config.ts";

/**
 * The folder is open in a live process: the message says which and what to do. A fault of how
 * the process was started, said in one line like any other (src/lifecycle.ts orDie).
 */
export class DatabaseInUse extends ConfigError {}

/** Takes the lock of the PGlite folder `dir`; the function returned releases it. */
export function lockPgliteFolder(dir: string): () => void {
  const file = `${dir}.lock`;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      writeFileSync(file, `${process.pid} ${THIS_PROCESS}\n`, { flag: "wx" });
      return () => rmSync(file, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    const holder = holderOf(file);
    if (holder !== null && alive(holder.pid) && !(holder.pid === process.pid && holder.token !== THIS_PROCESS)) {
      throw new DatabaseInUse(
        `the PGlite database in ${dir} is open in process ${holder.pid} (is linkgate running?): embedded PGlite serves one process at a time; ` +
          `stop that process first, or set DATABASE_URL to share a Postgres server (if no linkgate process has that id, delete ${file})`,
      );
    }
    rmSync(file, { force: true }); // its process is gone: a crash left it
  }
  throw new DatabaseInUse(`could not take the lock ${file} of the PGlite database in ${dir}`);
}

/**
 * Which process wrote a lock: its id, and a token of that process's own. A container restarted
 * after a hard kill often runs as the same process id (1) as the one that left the lock, which
 * then looked alive for ever (fourteenth review): a lock naming this process's id but not its
 * token was left by another process, and is stale.
 */
const THIS_PROCESS = randomBytes(8).toString("hex");

function holderOf(file: string): { pid: number; token: string | undefined } | null {
  try {
    const [pidText, token] = readFileSync(file, "utf8").trim().split(/\s+/);
    const pid = Number.parseInt(pidText, 10);
    return Number.isSafeInteger(pid) && pid > 0 ? { pid, token } : null;
  } catch {
    return null; // released meanwhile
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM" && !zombie(pid); // alive, owned by another user
  }
  return !zombie(pid);
}

/**
 * A process that has exited but whose parent has not reaped it (a supervisor or a shell that
 * never waits, a container's first process that does not reap) still answers signal 0, yet holds
 * no file (31st review). Linux says so in /proc/<pid>/stat, whose third field follows the name in
 * parentheses; elsewhere the check is signal 0 alone.
 */
function zombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) === "Z";
  } catch {
    return false;
  }
}
