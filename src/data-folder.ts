// LINKGATE_DATA_DIR holds the embedded database and, without LINKGATE_SECRET_KEY, the development
// master key. Its default, ./.data, is inside the checkout, which an image often runs read-only,
// as a user who does not own it (docs/operations.md, "Running in a container"): a start there
// died of EACCES with a stack trace that never said which variable to set.
import path from "node:path";
import { ConfigError } from "./config.ts";

/** What a folder this process may not write fails with: no permission, a read-only mount, or a file in its place. */
const DENIED: Record<string, string> = {
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EROFS: "read-only file system",
  // a file where the folder (or one of its parents) should be: a stack trace before
  ENOTDIR: "a file is in the way, not a folder",
  EEXIST: "a file is in the way, not a folder",
};

/**
 * The failure of a write in the data folder `dataDir`, as the one line that says what to set, when
 * the folder is not this user's to write; null for any other failure (reported as it is).
 * `instead`: what the write is for, and the variable that does without it.
 */
export function dataFolderFault(err: unknown, dataDir: string, instead: string): ConfigError | null {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (!code || !(code in DENIED)) return null;
  const user = process.getuid ? ` (user ${process.getuid()})` : "";
  return new ConfigError(
    `cannot write the data folder ${path.resolve(dataDir)}: ${DENIED[code]}. Set LINKGATE_DATA_DIR to a folder this user${user} can write ` +
      `(a volume, in a container; the default is ./.data in the folder linkgate starts in), ${instead}`,
  );
}

/** Runs `write` in the data folder, a folder this user may not write said as dataFolderFault says it. */
export function writingDataFolder<T>(dataDir: string, instead: string, write: () => T): T {
  try {
    return write();
  } catch (err) {
    throw dataFolderFault(err, dataDir, instead) ?? err;
  }
}
