// The entry points that `npm start`, `npm run worker` and `npm run db:migrate` run (package.json,
// README.md): the server compiled to dist/ and started with plain node, no TypeScript loader.
// test/support/global-setup.ts compiles dist/ first whenever a source is newer than the build,
// so a child process runs the sources under test.
import path from "node:path";

const ROOT = path.resolve(import.meta.dirname, "../..");

export const MAIN = path.join(ROOT, "dist/main.js");
export const WORKER = path.join(ROOT, "dist/worker.js");
export const MIGRATE = path.join(ROOT, "dist/db/migrate-cli.js");
