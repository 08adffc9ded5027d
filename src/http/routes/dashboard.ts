// The webhook dashboard's built static files (dashboard/dist, made by `npm run dashboard:build`,
// which `npm install` runs) at /dashboard and /dashboard/*. The page talks only to /graphql.
import { Hono, type Context } from "hono";
import { readFile, stat } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { AppEnv } from "../env.ts";
import { errorBody } from "../errors.ts";

const DEFAULT_ROOT = fileURLToPath(new URL("../../../dashboard/dist/", import.meta.url));

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".txt": "text/plain; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".webp": "image/webp",
  ".woff2": "font/woff2",
};

// The page holds an API key: no third-party code, no framing, no referrers.
const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
};

/** The file segments of a request path below /dashboard/, or null if any is unsafe. */
function segments(rest: string): string[] | null {
  const out: string[] = [];
  for (const raw of rest.split("/")) {
    if (raw === "") continue;
    let seg: string;
    try {
      seg = decodeURIComponent(raw);
    } catch {
      return null;
    }
    // no "..", no dotfiles, no encoded separators or NULs
    if (seg.startsWith(".") || /[/\\\0]/.test(seg)) return null;
    out.push(seg);
  }
  return out;
}

export function dashboardRoutes(opts: { root?: string } = {}) {
  const root = path.resolve(opts.root ?? DEFAULT_ROOT);
  const r = new Hono<AppEnv>();

  const notFound = (c: Context<AppEnv>) => c.json(errorBody("NotFound", `no dashboard file at ${c.req.path}`), 404);

  const serve = async (c: Context<AppEnv>, rest: string) => {
    const built = await stat(path.join(root, "index.html")).catch(() => null);
    if (!built?.isFile()) {
      return c.text("The dashboard is not built. Run `npm run dashboard:build` (npm install also runs it), then reload.\n", 503, {
        "cache-control": "no-store",
      });
    }
    const segs = segments(rest);
    if (!segs) return notFound(c);
    const file = path.join(root, ...(segs.length ? segs : ["index.html"]));
    if (!file.startsWith(root + path.sep)) return notFound(c);
    const info = await stat(file).catch(() => null);
    if (!info?.isFile()) return notFound(c);
    const type = TYPES[path.extname(file).toLowerCase()] ?? "application/octet-stream";
    // Vite names assets by content hash; index.html must always be fetched fresh.
    const immutable = segs[0] === "assets";
    return c.body(new Uint8Array(await readFile(file)), 200, {
      "content-type": type,
      "cache-control": immutable ? "public, max-age=31536000, immutable" : "no-cache",
      ...SECURITY_HEADERS,
    });
  };

  r.get("/dashboard", (c) => serve(c, ""));
  r.get("/dashboard/*", (c) => serve(c, new URL(c.req.url).pathname.slice("/dashboard/".length)));
  return r;
}
