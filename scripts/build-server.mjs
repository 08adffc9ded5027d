// Compiles the server (src/) to JavaScript in dist/, so `npm start`, `npm run worker`,
// `npm run db:migrate` and `npx linkgate` run it with plain `node`: no TypeScript loader at run
// time, and the process that npm starts is the server itself (signals reach it).
// Run by scripts/postinstall.mjs and, with --if-stale, before `npm test` (a no-op unless a
// source file is newer than the last build).
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const src = path.join(root, "src");
const dist = path.join(root, "dist");
const stamp = path.join(dist, ".built");

function* files(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) yield* files(p);
    else yield p;
  }
}

function stale() {
  if (!existsSync(stamp)) return true;
  const built = statSync(stamp).mtimeMs;
  const inputs = [...files(src), path.join(root, "tsconfig.json"), path.join(root, "tsconfig.build.json")];
  return inputs.some((f) => statSync(f).mtimeMs > built);
}

if (process.argv.includes("--if-stale") && !stale()) process.exit(0);

const started = new Date();
rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
const r = spawnSync(process.execPath, [tsc, "-p", path.join(root, "tsconfig.build.json")], { cwd: root, stdio: "inherit" });
if (r.status !== 0) process.exit(r.status ?? 1);
// Files the server reads next to its own modules (the /docs page script, SQL files beside their
// feature) come along as they are, at the same place relative to the compiled modules.
for (const f of files(src)) {
  if (f.endsWith(".ts")) continue;
  cpSync(f, path.join(dist, path.relative(src, f)));
}
// Dated when the build began: a source saved while tsc ran makes the next --if-stale build again.
writeFileSync(stamp, `${started.toISOString()}\n`);
utimesSync(stamp, started, started);
