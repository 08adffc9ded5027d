// `npm install` in a checkout: generate the Prisma client, then build the dashboard and the
// hosted pages. Installed from a tarball (an integrator who wants `linkgate/receiver`), the page
// sources and their dev-only build tools are absent: those builds are skipped, not failed.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

function run(script) {
  const r = spawnSync("npm", ["run", "--silent", script], { stdio: "inherit", shell: process.platform === "win32" });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

run("generate");
const vite = existsSync("node_modules/vite");
for (const [dir, script] of [
  ["dashboard", "dashboard:build"],
  ["pages", "pages:build"],
]) {
  if (existsSync(`${dir}/vite.config.ts`) && vite) run(script);
  else console.log(`linkgate: skipping ${script} (no ${dir}/ sources or no vite here)`);
}
