// Generates the Prisma client and the Pothos types from prisma/schema.prisma.
//
// `prisma generate` never runs the schema engine, but its CLI insists the native engine
// file exists and otherwise tries to download it, which fails on machines that reach only
// the npm registry (see shared notes). When no engine is installed we point
// PRISMA_SCHEMA_ENGINE_BINARY at an existing executable (node itself) to satisfy that
// check; on an ordinary machine with the engine present nothing is overridden.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(import.meta.url);
const env = { ...process.env, PRISMA_HIDE_UPDATE_MESSAGE: "1", CHECKPOINT_DISABLE: "1" };
// The Pothos generator is a bin of node_modules; put it on PATH when run outside npm.
env.PATH = `${path.resolve("node_modules/.bin")}${path.delimiter}${env.PATH ?? ""}`;

function nativeEngineInstalled() {
  try {
    const dir = path.dirname(require.resolve("@prisma/engines/package.json"));
    return readdirSync(dir).some((f) => f.startsWith("schema-engine"));
  } catch {
    return false;
  }
}

if (!env.PRISMA_SCHEMA_ENGINE_BINARY && !nativeEngineInstalled()) {
  env.PRISMA_SCHEMA_ENGINE_BINARY = process.execPath;
}

const cli = require.resolve("prisma/build/index.js");
if (!existsSync("prisma/schema.prisma")) process.exit(0);
const r = spawnSync(process.execPath, [cli, "generate", "--schema", "prisma/schema.prisma"], {
  env,
  stdio: "inherit",
});
process.exit(r.status ?? 1);
