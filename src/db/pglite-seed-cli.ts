// `node dist/pglite-seed.js`: makes the empty PGlite cluster first starts copy (src/db/pglite-seed.ts),
// once per PGlite version; run by scripts/build-server.mjs at install. A no-op when it exists.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from "node:fs";
import path from "node:path";
import { pgliteSeedDir } from "./pglite-seed.ts";

const seed = pgliteSeedDir();
if (!existsSync(path.join(seed, "PG_VERSION"))) {
  mkdirSync(path.dirname(seed), { recursive: true });
  const making = mkdtempSync(path.join(path.dirname(seed), ".making-"));
  try {
    // the database code loads only when there is a cluster to make: a no-op run stays quick
    const { openDatabase } = await import("./client.ts");
    const db = await openDatabase({ dataDir: making });
    await db.close();
    readableByAll(path.join(making, "pglite"));
    // whole or not at all: an install running beside another may have made it meanwhile
    try {
      renameSync(path.join(making, "pglite"), seed);
    } catch (err) {
      if (!existsSync(path.join(seed, "PG_VERSION"))) throw err;
    }
  } finally {
    rmSync(making, { recursive: true, force: true });
  }
}
process.exit(0);

/**
 * The cluster holds nothing secret (initdb's files only), and the user who installs (root, in an
 * image's build) is often not the one who runs the server: PGlite made it the owner's alone.
 */
function readableByAll(dir: string): void {
  chmodSync(dir, 0o755);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const at = path.join(dir, entry.name);
    if (entry.isDirectory()) readableByAll(at);
    else chmodSync(at, 0o644);
  }
}
