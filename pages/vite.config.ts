// Builds the hosted sign-in and account pages into pages/dist, served by
// src/http/routes/pages.ts at /login and /account (assets under /pages/).
// `npm run pages:build` (also part of `npm install`).
import { fileURLToPath } from "node:url";
import { defineConfig, type Plugin } from "vite";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

/**
 * The server writes the project's publishable key into each page as it serves it; the dev
 * server (`vite --config pages/vite.config.ts`) takes it from the environment instead.
 */
function devPublishableKey(): Plugin {
  return {
    name: "linkgate-dev-publishable-key",
    apply: "serve",
    transformIndexHtml: (html) =>
      html.replace('content=""', `content="${(process.env.LINKGATE_PAGES_PUBLISHABLE_KEY ?? "").replace(/[^\w-]/g, "")}"`),
  };
}

export default defineConfig({
  root: here("."),
  base: "/pages/",
  // Preact's automatic JSX runtime, without a framework plugin.
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  plugins: [devPublishableKey()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    assetsInlineLimit: 0,
    rolldownOptions: {
      input: { login: here("login.html"), account: here("account.html") },
      // what both pages use (Preact, @simplewebauthn/browser, the API client) in one cached file
      output: { chunkFileNames: "assets/shared-[hash].js" },
    },
  },
  // `vite` (dev server) forwards the API to a running linkgate.
  server: { proxy: { "/graphql": "http://127.0.0.1:4000" } },
});
