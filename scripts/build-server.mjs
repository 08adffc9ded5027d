// Builds the server (src/) into dist/, so `npm start`, `npm run worker`, `npm run db:migrate` and
// `npx linkgate` run it with plain `node`: no TypeScript loader at run time, and the process that
// npm starts is the server itself (signals reach it).
// Run by scripts/postinstall.mjs and, with --if-stale, before `npm test` (a no-op unless a
// source file is newer than the last build).
//
// Each command is one bundle (esbuild) with its dependencies in it: a start loaded some 1,700
// files one module at a time, about half of its time to ready (bench/RESULTS.md, "start").
// Code a command reaches only later (GraphiQL's page, the passkey library, the OpenID provider)
// stays in chunks of its own, loaded when first used. Not bundled: PGlite and Prisma, which load
// their WebAssembly and files from beside their own modules, and the pg driver, which Prisma's
// adapter imports from node_modules too (a second, bundled copy broke its connections). No
// type checking here: `npm run typecheck` does that, and an install must not fail on a type
// error that tsx would have run anyway.
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

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
  const inputs = [...files(src), path.join(root, "tsconfig.json"), fileURLToPath(import.meta.url)];
  return inputs.some((f) => statSync(f).mtimeMs > built);
}

if (process.argv.includes("--if-stale") && !stale()) process.exit(0);

/** The commands package.json and bin/linkgate.mjs run (dist/<name>.js), and their sources. */
const ENTRIES = {
  main: "src/main.ts",
  worker: "src/worker.ts",
  cli: "src/cli/main.ts",
  "migrate-cli": "src/db/migrate-cli.ts",
  "pglite-seed": "src/db/pglite-seed-cli.ts",
};

/**
 * PGlite's Postgres and Prisma's query compiler are WebAssembly. V8 compiles each function with
 * its baseline compiler (Liftoff) when first called, and again with its optimizing compiler
 * (TurboFan), in the background, once it is warm: a start warmed thousands of functions at once,
 * and compiling them twice was about 40 % of a start's CPU. So every command starts with the
 * baseline compiler only. The admin CLI and `npm run db:migrate` (BRIEF) exit a second or two
 * later and keep it; the server and the worker turn the optimizing compiler back on once
 * started, so what stays warm while they run is optimized as before (a PGlite that kept the
 * baseline code for good drained deliveries 15 to 35 % slower). Measured on a 2-core machine
 * (bench/RESULTS.md, "start"): `node dist/main.js` to /readyz on PGlite 3.4-4.0 -> 2.4-2.8 s
 * (CPU 4.4-5.2 -> 2.5-2.9 s), on Postgres 2.4-2.8 -> 2.1-2.4 s; `linkgate projects list`
 * 2.0 -> 1.4 s on PGlite, 1.3 -> 0.95 s on Postgres; `db migrate` on an empty PGlite folder
 * 6.4 -> 5.5 s. (Node 20's V8 reads the flag whenever it would tier a function up; switching it
 * back was checked to resume tiering.)
 */
const BRIEF = new Set(["cli", "migrate-cli", "pglite-seed"]);

/**
 * dist/<name>.js turns source maps on, then loads its bundle: a stack trace in the log names
 * src/auth/sign-in.ts:120, not line 79,103 of one large file. Node reads a module's map when it
 * loads the module, so the switch has to come before the bundle is imported. Reading the maps
 * (1.9 MB for the server, without the sources' text) costs about 80 ms of a start.
 */
const launcher = (name) => `// Built by scripts/build-server.mjs: source maps on, WebAssembly compiled by V8's baseline
// compiler only ${BRIEF.has(name) ? "(a brief command)" : "until the command has started"}, then the bundle.
import { setFlagsFromString } from "node:v8";
setFlagsFromString("--liftoff-only");
process.setSourceMapsEnabled(true);
await import("./${name}.bundle.js");
${BRIEF.has(name) ? "" : 'setFlagsFromString("--no-liftoff-only");\n'}`;

/**
 * A module finds files beside itself through import.meta.url (prisma/, package.json, the pages,
 * the SQL files, packages through createRequire). In a bundle that is the bundle's URL, so each
 * module's is replaced by the URL it would have in dist/ had it been compiled on its own: every
 * bundle and chunk sits at the top of dist/, and the files it reads are copied beside it below.
 */
const moduleUrls = {
  name: "module-urls",
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, (args) => {
      if (!args.path.startsWith(src + path.sep)) return undefined;
      const text = readFileSync(args.path, "utf8");
      const own = path.relative(src, args.path).split(path.sep).join("/").replace(/\.ts$/, ".js");
      return { contents: text.replaceAll("import.meta.url", `new URL(${JSON.stringify(own)}, import.meta.url).href`), loader: "ts" };
    });
  },
};

const started = new Date();
rmSync(dist, { recursive: true, force: true });
await esbuild.build({
  absWorkingDir: root,
  entryPoints: Object.fromEntries(Object.entries(ENTRIES).map(([name, source]) => [`${name}.bundle`, source])),
  outdir: dist,
  chunkNames: "[name]-[hash]",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  sourcemap: true,
  sourcesContent: false,
  external: ["@electric-sql/pglite", "@electric-sql/pglite/*", "@prisma/*", "pg", "pg-*"],
  // Bundled CommonJS packages call require() for Node's own modules.
  banner: { js: 'import { createRequire as linkgateCreateRequire } from "node:module"; const require = linkgateCreateRequire(import.meta.url);' },
  plugins: [moduleUrls],
  logLevel: "warning",
});
for (const name of Object.keys(ENTRIES)) writeFileSync(path.join(dist, `${name}.js`), launcher(name));
// Files the server reads next to its own modules (the /docs page script, SQL files beside their
// feature) come along as they are, at the same place relative to the compiled modules.
for (const f of files(src)) {
  if (f.endsWith(".ts")) continue;
  cpSync(f, path.join(dist, path.relative(src, f)));
}
// Dated when the build began: a source saved while it ran makes the next --if-stale build again.
writeFileSync(stamp, `${started.toISOString()}\n`);
utimesSync(stamp, started, started);

// The empty PGlite cluster first starts copy instead of running initdb (src/db/pglite-seed.ts):
// made once per PGlite version, so every later build finds it and moves on. Without it a first
// start on PGlite runs initdb as it always did, so an install that cannot make it still works.
const seeded = spawnSync(process.execPath, [path.join(dist, "pglite-seed.js")], { stdio: "inherit" });
if (seeded.status !== 0) console.warn("linkgate: could not prepare PGlite's empty cluster; a first start on PGlite will make it (slower)");
