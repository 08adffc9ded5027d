// `npm install` / `npm ci` in a checkout: generate the Prisma client, bundle the server into dist/
// (what `npm start` runs; esbuild, and TypeScript for the receiver, are runtime dependencies for
// that reason), build the @linkgate/receiver workspace (the examples and docs import it through
// its workspace link), then the dashboard and the hosted pages. An install without dev
// dependencies (`--omit=dev`) has no vite: those two builds are skipped, not failed.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

// `npx linkgate` in a checkout links the checkout into npm's npx cache to run its bin, and that
// runs this script again, in the checkout: it rebuilt everything (14 to 27 s) and rewrote dist/
// under running servers (eighteenth review). The checkout's own `npm install` built it already.
if (process.env.npm_command === "exec") process.exit(0);

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
