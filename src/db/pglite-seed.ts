// The empty PGlite cluster a first start begins from. Creating one (initdb, in WebAssembly) was
// most of a first start on an empty data folder: 5.6 to 6.4 of 8.1 s to /readyz on a slow
// 2-core machine (bench/RESULTS.md, "start"); a first start on a fast one went from 3.1 to 1.7 s
// without it. The install makes it
// once per PGlite version (`node dist/pglite-seed.js`, run by scripts/build-server.mjs) and a
// first start copies it instead: a copy of its 38 MB takes about 0.25 s. Only the cluster
// initdb makes is kept there, nothing linkgate writes: the migrations, the signing keys and the
// first project are made by each start as before, so no two installations share a secret.
import { chmodSync, copyFileSync, cpSync, existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

/** Where this installation's PGlite keeps its prepared cluster: npm's cache folder beside it, by version. */
export function pgliteSeedDir(): string {
  const entry = createRequire(import.meta.url).resolve("@electric-sql/pglite");
  let dir = path.dirname(entry);
  while (!existsSync(path.join(dir, "package.json"))) dir = path.dirname(dir);
  const { version } = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as { version: string };
  // <node_modules>/@electric-sql/pglite → <node_modules>/.cache/linkgate
  return path.join(dir, "..", "..", ".cache", "linkgate", `pglite-${version}`);
}

/**
 * Copies the prepared cluster into `dir` when `dir` holds none yet (no PG_VERSION: PGlite would
 * run initdb there). PG_VERSION is copied last because PGlite takes a folder that has it for a
 * whole cluster: a copy cut off before the end is made again by the next start. Returns whether
 * it copied. Without a prepared cluster (an install that could not make one), or with one this
 * start cannot copy, PGlite runs initdb as it always did: the folder, which holds no cluster, is
 * emptied for it.
 */
export function adoptPgliteSeed(dir: string, seed = pgliteSeedDir()): boolean {
  const version = "PG_VERSION";
  if (existsSync(path.join(dir, version)) || !existsSync(path.join(seed, version))) return false;
  try {
    cpSync(seed, dir, { recursive: true, filter: (from) => from !== path.join(seed, version) });
    ownersAlone(dir);
    copyFileSync(path.join(seed, version), path.join(dir, version));
    chmodSync(path.join(dir, version), 0o600);
    return true;
  } catch {
    for (const entry of readdirSync(dir)) rmSync(path.join(dir, entry), { recursive: true, force: true });
    return false;
  }
}

/**
 * A copy keeps the prepared cluster's modes, and an install made read-only (`chmod -R a-w`, as an
 * image may be) gave a cluster PGlite could not write: the first start aborted in its
 * WebAssembly. What is copied is the running user's, as initdb makes a cluster: 0700 and 0600.
 */
function ownersAlone(dir: string): void {
  // the folder itself is left as openPglite made it (another user's folder is used as it is)
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const at = path.join(dir, entry.name);
    chmodSync(at, entry.isDirectory() ? 0o700 : 0o600);
    if (entry.isDirectory()) ownersAlone(at);
  }
}
