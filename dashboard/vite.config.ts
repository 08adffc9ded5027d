// Builds the webhook dashboard into dashboard/dist, served by src/http/routes/dashboard.ts at
// /dashboard. `npm run dashboard:build` (also part of `npm install`).
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "/dashboard/",
  // Preact's automatic JSX runtime, without a framework plugin.
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: { outDir: "dist", emptyOutDir: true, target: "es2022", assetsInlineLimit: 0 },
  // `vite` (dev server) forwards the API to a running linkgate.
  server: { proxy: { "/graphql": "http://127.0.0.1:4000" } },
});
