#!/usr/bin/env node
// `npx linkgate <command>`: the admin CLI (src/cli). Its sources are TypeScript, run through tsx
// (a runtime dependency) the way `npm start` runs the server, so nothing has to be built first.
import { register } from "tsx/esm/api";

register();
await import("../src/cli/main.ts");
