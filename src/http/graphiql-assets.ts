// GraphiQL's page and files, from the installed @graphql-yoga/render-graphiql package, served
// from this origin under a strict Content-Security-Policy: no CDN, no inline script. The page is
// answered by the GraphQL endpoint's plugin (src/graphql/graphiql.ts), the files by
// src/http/routes/graphiql.ts.
import { createRequire } from "node:module";
import { gzip } from "node:zlib";
import { promisify } from "node:util";
import type { GraphiQLOptions } from "graphql-yoga";

export const GRAPHQL_PATH = "/graphql";
const version: string = createRequire(import.meta.url)("@graphql-yoga/render-graphiql/package.json").version;
/** Versioned, so the files can be cached for good. */
export const GRAPHIQL_ASSET_BASE = `${GRAPHQL_PATH}/assets/${version}/`;

/**
 * For the page and its files. Monaco adds <style> elements at run time, which only
 * 'unsafe-inline' allows for styles; scripts stay 'self' only, the part that matters for the
 * API key. Fonts and the icon sprite are data: URLs inside the bundled CSS.
 */
export const GRAPHIQL_HEADERS: Record<string, string> = {
  "content-security-policy": [
    "default-src 'self'",
    "script-src 'self'",
    "worker-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; "),
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  // the page a secret key is typed into: the site that opened it must not be able to send this
  // tab elsewhere (a look-alike asking for the key again), as on every other page
  "cross-origin-opener-policy": "same-origin",
};

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
/** JSON safe inside a <script> data block: no "</script>" or "<!--" can form. */
const scriptJson = (v: unknown) => JSON.stringify(v).replace(/</g, "\\u003c");

export function renderPage(options: GraphiQLOptions): string {
  const a = GRAPHIQL_ASSET_BASE;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeHtml(options.title ?? "GraphiQL")}</title>
<link rel="icon" href="${a}favicon.ico">
<link rel="stylesheet" href="${a}graphiql.css">
</head>
<body id="body" class="no-focus-outline">
<noscript>GraphiQL needs JavaScript.</noscript>
<div id="root"></div>
<script type="application/json" id="graphiql-options">${scriptJson(options)}</script>
<script src="${a}boot.js"></script>
<script src="${a}graphiql.js"></script>
</body>
</html>
`;
}

/**
 * Runs before GraphiQL's bundle: Monaco's workers load from this origin (the stock page makes
 * them from blob: URLs), and the page starts once the bundle has run.
 */
const BOOT_JS = `"use strict";
(function () {
  var base = document.currentScript.src.replace(/[^/]*$/, "");
  var workers = { editorWorkerService: "editor.worker.js", json: "json.worker.js", graphql: "graphql.worker.js" };
  self.MonacoEnvironment = {
    globalAPI: false,
    getWorkerUrl: function (_moduleId, label) {
      return base + (workers[label] || workers.editorWorkerService);
    },
  };
  // headers an earlier version let GraphiQL keep (a key, a token): gone, tabs and all
  try {
    localStorage.removeItem("graphiql:headers");
    var tabs = JSON.parse(localStorage.getItem("graphiql:tabState") || "null");
    if (tabs && Array.isArray(tabs.tabs)) {
      tabs.tabs.forEach(function (t) { t.headers = null; });
      localStorage.setItem("graphiql:tabState", JSON.stringify(tabs));
    }
  } catch (e) {}
  document.addEventListener("DOMContentLoaded", function () {
    var options = JSON.parse(document.getElementById("graphiql-options").textContent);
    YogaGraphiQL.renderYogaGraphiQL(document.getElementById("root"), options);
  });
})();
`;

/**
 * Appended to GraphiQL's stylesheet. On a phone GraphiQL keeps its desktop row (editor, drag
 * bar, response side by side), leaving the editor a sliver beside its toolbar and the response a
 * column of single letters: below 640 px the response goes under the editor instead, full width.
 */
export const NARROW_CSS = `
@media (max-width: 640px) {
  .graphiql-container { --sidebar-width: 44px; }
  .graphiql-container .graphiql-sessions { margin: 8px 8px 8px 0; }
  .graphiql-container #graphiql-session { flex-direction: column; padding: 0 4px 4px; gap: 8px; }
  .graphiql-container .graphiql-horizontal-drag-bar { display: none; }
  .graphiql-container .graphiql-editors { flex: 3 1 0% !important; min-height: 0; }
  .graphiql-container .graphiql-response { flex: 2 1 0% !important; min-height: 0; padding-top: 0; }
  .graphiql-container .graphiql-query-editor { padding: 8px; column-gap: 8px; }
  .graphiql-container .graphiql-editor { min-width: 0; position: relative; overflow: hidden; }
}
`;

export type GraphiQLAsset = { type: string; body: Uint8Array<ArrayBuffer>; gzipped: Uint8Array<ArrayBuffer> };

const JS = "text/javascript; charset=utf-8";
let assets: Promise<Map<string, GraphiQLAsset>> | null = null;

/** A file of the page by name, or undefined. The package (9 MB of strings) loads on first use. */
export async function graphiqlAsset(name: string): Promise<GraphiQLAsset | undefined> {
  assets ??= loadAssets().catch((err) => {
    assets = null; // let a later request try again
    throw err;
  });
  return (await assets).get(name);
}

async function loadAssets(): Promise<Map<string, GraphiQLAsset>> {
  const bundle = await import("@graphql-yoga/render-graphiql/graphiql");
  const files: [string, string, Buffer][] = [
    ["boot.js", JS, Buffer.from(BOOT_JS)],
    ["graphiql.js", JS, Buffer.from(bundle.js)],
    ["graphiql.css", "text/css; charset=utf-8", Buffer.from(bundle.css + NARROW_CSS)],
    ["editor.worker.js", JS, Buffer.from(bundle.editorWorkerService)],
    ["json.worker.js", JS, Buffer.from(bundle.jsonWorker)],
    ["graphql.worker.js", JS, Buffer.from(bundle.graphqlWorker)],
    ["favicon.ico", "image/x-icon", dataUrlBytes(bundle.favicon)],
  ];
  const gz = promisify(gzip);
  const bytes = (b: Buffer) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength) as Uint8Array<ArrayBuffer>;
  return new Map(await Promise.all(files.map(async ([name, type, body]) => [name, { type, body: bytes(body), gzipped: bytes(await gz(body)) }] as const)));
}

function dataUrlBytes(url: string): Buffer {
  const comma = url.indexOf(",");
  return Buffer.from(url.slice(comma + 1), url.slice(0, comma).endsWith(";base64") ? "base64" : "utf8");
}
