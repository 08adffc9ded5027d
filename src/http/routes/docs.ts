// The REST reference: the OpenAPI document at /openapi.json, and Swagger UI at /docs, its files
// served from the installed swagger-ui-dist package (never a CDN) and its start-up script from
// src/http/docs-page/, under the same Content-Security-Policy as the dashboard.
import { Hono, type Context } from "hono";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import type { AppEnv } from "../env.ts";
import { notFound } from "../errors.ts";
import { openApiDocument } from "../openapi.ts";
import { acceptsGzip, PAGE_SECURITY_HEADERS, underPrefix } from "../static-files.ts";

const require = createRequire(import.meta.url);
const SWAGGER_DIR = path.dirname(require.resolve("swagger-ui-dist/package.json"));
const SWAGGER_VERSION: string = require("swagger-ui-dist/package.json").version;
const PAGE_DIR = fileURLToPath(new URL("../docs-page/", import.meta.url));

/** Versioned, so the package's files can be cached for good. */
export const DOCS_ASSET_BASE = `/docs/assets/${SWAGGER_VERSION}/`;
const INIT_PATH = "/docs/init.js";

/**
 * The dashboard's headers, unrelaxed: Swagger UI sets its inline styles through the CSSOM
 * (which style-src does not govern) and its icons are data: URLs in its CSS. "Try it out"
 * calls this origin only.
 */
export const DOCS_HEADERS = PAGE_SECURITY_HEADERS;

const JS = "text/javascript; charset=utf-8";
const CSS = "text/css; charset=utf-8";
const MAP = "application/json; charset=utf-8";
const PNG = "image/png";

/** The only files served from the package. */
const PACKAGE_FILES: Record<string, string> = {
  "swagger-ui-bundle.js": JS,
  "swagger-ui-bundle.js.map": MAP,
  "swagger-ui.css": CSS,
  "swagger-ui.css.map": MAP,
  "index.css": CSS,
  "favicon-32x32.png": PNG,
  "favicon-16x16.png": PNG,
};

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>linkgate REST API</title>
<link rel="icon" type="image/png" href="${DOCS_ASSET_BASE}favicon-32x32.png" sizes="32x32">
<link rel="icon" type="image/png" href="${DOCS_ASSET_BASE}favicon-16x16.png" sizes="16x16">
<link rel="stylesheet" href="${DOCS_ASSET_BASE}swagger-ui.css">
<link rel="stylesheet" href="${DOCS_ASSET_BASE}index.css">
</head>
<body>
<noscript>This reference needs JavaScript. The document itself is at <a href="/openapi.json">/openapi.json</a>.</noscript>
<div id="swagger-ui"></div>
<script src="${DOCS_ASSET_BASE}swagger-ui-bundle.js"></script>
<script src="${INIT_PATH}"></script>
</body>
</html>
`;

type Asset = { body: Uint8Array<ArrayBuffer>; gzipped?: Uint8Array<ArrayBuffer> };
const assets = new Map<string, Promise<Asset>>();

/** A file read once; compressed on first demand (the bundle is 1.5 MB, 0.4 MB gzipped). */
function loadAsset(file: string, gz: boolean): Promise<Asset> {
  let loaded = assets.get(file);
  if (!loaded) {
    loaded = readFile(file).then((b) => ({ body: new Uint8Array(b) }));
    assets.set(file, loaded);
  }
  if (!gz) return loaded;
  return loaded.then(async (a) => {
    a.gzipped ??= new Uint8Array(await promisify(gzip)(a.body));
    return a;
  });
}

async function sendAsset(c: Context<AppEnv>, file: string, type: string, cacheControl: string) {
  // Source maps and images gain nothing from gzip.
  const gz = (type === JS || type === CSS) && acceptsGzip(c);
  const asset = await loadAsset(file, gz);
  return c.body(gz ? asset.gzipped! : asset.body, 200, {
    "content-type": type,
    "cache-control": cacheControl,
    vary: "Accept-Encoding",
    ...(gz ? { "content-encoding": "gzip" } : {}),
    ...DOCS_HEADERS,
  });
}

/** `prefix`: the issuer's path, which the page's files are asked for under (src/config.ts publicPath). */
export function docsRoutes(prefix = "") {
  const r = new Hono<AppEnv>();
  const page = underPrefix(PAGE, prefix);
  r.get("/openapi.json", (c) => c.json(openApiDocument(), 200, { "cache-control": "no-cache" }));
  r.get("/docs", (c) => c.html(page, 200, { "cache-control": "no-cache", ...DOCS_HEADERS }));
  r.get(INIT_PATH, (c) => sendAsset(c, path.join(PAGE_DIR, "init.js"), JS, "no-cache"));
  r.get(`${DOCS_ASSET_BASE}:file`, (c) => {
    const name = c.req.param("file") ?? "";
    const type = Object.hasOwn(PACKAGE_FILES, name) ? PACKAGE_FILES[name] : undefined;
    if (!type) return notFound(c, `no route for GET ${c.req.path}`);
    return sendAsset(c, path.join(SWAGGER_DIR, name), type, "public, max-age=31536000, immutable");
  });
  return r;
}
