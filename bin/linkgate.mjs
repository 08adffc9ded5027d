#!/usr/bin/env node
// `npx linkgate <command>`: the admin CLI (src/cli), compiled to dist/ by `npm install`
// (scripts/build-server.mjs) like the server.
await import("../dist/cli/main.js");
