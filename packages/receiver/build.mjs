// Builds dist/esm and dist/cjs from src/index.ts. Run by `npm pack` (prepack) and by linkgate's
// own postinstall, so the workspace link node_modules/@linkgate/receiver resolves in a checkout.
import { spawnSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
// TypeScript is a development dependency of the linkgate workspace, not of this package.
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");

rmSync(new URL("dist/", import.meta.url), { recursive: true, force: true });
for (const config of ["tsconfig.json", "tsconfig.cjs.json"]) {
  const r = spawnSync(process.execPath, [tsc, "-p", config], { cwd: here, stdio: "inherit" });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
mkdirSync(new URL("dist/cjs/", import.meta.url), { recursive: true });
writeFileSync(new URL("dist/cjs/package.json", import.meta.url), '{ "type": "commonjs" }\n');
