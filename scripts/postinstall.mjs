// `npm install` / `npm ci` in a checkout: generate the Prisma client, compile the server to dist/
// (what `npm start` runs; TypeScript is a runtime dependency for that reason), build the
// @linkgate/receiver workspace (the examples and docs import it through its workspace link), then
// the dashboard and the hosted pages. An install without dev dependencies (`--omit=dev`) has no
// vite: those two builds are skipped, not failed.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

function run(command, args) {
  const r = spawnSync(command, args, { stdio: "inherit", shell: process.platform === "win32" });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

run("npm", ["run", "--silent", "generate"]);
run(process.execPath, ["scripts/build-server.mjs"]);
run(process.execPath, ["packages/receiver/build.mjs"]);
const vite = existsSync("node_modules/vite");
for (const [dir, script] of [
  ["dashboard", "dashboard:build"],
  ["pages", "pages:build"],
]) {
  if (existsSync(`${dir}/vite.config.ts`) && vite) run("npm", ["run", "--silent", script]);
  else console.log(`linkgate: skipping ${script} (no ${dir}/ sources or no vite here)`);
}
