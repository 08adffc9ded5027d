#!/usr/bin/env node
// `npx linkgate <command>`: the admin CLI (src/cli), bundled into dist/ by `npm install`
// (scripts/build-server.mjs) like the server.
import { existsSync } from "node:fs";

if (!existsSync(new URL("../dist/cli.js", import.meta.url))) {
  console.error("linkgate: the CLI is not built: run `npm install` in the checkout first");
  process.exit(1);
}
await import("../dist/cli.js");
