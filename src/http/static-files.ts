// Built front-end files (the dashboard, the hosted pages) served from a folder: a path is
// split into safe segments or refused, types come from one table, and every response carries
// the pages' strict security headers.
import type { Context } from "hono";
import { accepts } from "hono/accepts";
import { readFile, stat } from "node:fs/promises";
import path from "node:path";
import { notFound } from "./errors.ts";

/**
 * What an unbuilt UI answers, and says at start. Its build (vite) is a dev dependency: an install
 * with --omit=dev has none, and a start there listed /login and /dashboard as served
 * (docs/operations.md, "Running in a container").
 */
export function notBuilt(what: string, script: string): string {
  return `${what} not built. Run \`npm run ${script}\` (npm install runs it; an install with --omit=dev cannot, having no vite: install with dev dependencies, build, then \`npm prune --omit=dev\`), then reload.\n`;
}

/**
 * Whether the client takes a gzipped body, by its Accept-Encoding's weights: `gzip;q=0` says it
 * does not (a search for the word "gzip" sent it gzip anyway). A bare `*` is answered
 * uncompressed: every browser names gzip.
 */
export function acceptsGzip(c: Context): boolean {
  return accepts(c, { header: "Accept-Encoding", supports: ["gzip", "identity"], default: "identity" }) === "gzip";
}

export const CONTENT_TYPES: Record<string, string> = {
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

/**
 * The dashboard holds a secret key and the hosted pages a user's tokens: no third-party code,
 * no inline script, no framing, no referrers, and no window of another site that opened them
 * keeps a handle on them (it could send /login to an address of its choosing mid-sign-in).
 */
export const PAGE_SECURITY_HEADERS: Record<string, string> = {
  "cross-origin-opener-policy": "same-origin",
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
};

/**
 * A built page as served under the issuer's path (`prefix`, "" at the root): vite writes its
 * files' addresses from the root (`/pages/assets/…`), which behind a proxy that strips the
 * issuer's path led outside it, and the page's scripts ask for the server's paths under the
 * prefix written in a <meta> (ui/base.ts; docs/operations.md, "Behind a reverse proxy").
 */
export function underPrefix(html: string, prefix: string): string {
  if (!prefix) return html;
  const meta = `<meta name="linkgate-base-path" content="${prefix}" />`;
  return html.replace(/\b(src|href)="\/(?!\/)/g, `$1="${prefix}/`).replace("</head>", `${meta}</head>`);
}

/** The file segments of a request path below a prefix, or null if any is unsafe. */
export function safeSegments(rest: string): string[] | null {
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

export function contentType(file: string): string {
  return CONTENT_TYPES[path.extname(file).toLowerCase()] ?? "application/octet-stream";
}

/**
 * Serves `root/segs…` with the page headers, or answers 404 in the error shape. Vite names
 * files under assets/ by content hash, so those are cached for good; anything else (index.html)
 * is fetched fresh.
 */
export async function serveBuiltFile(c: Context, root: string, segs: string[]): Promise<Response> {
  const file = path.join(root, ...segs);
  const info = file.startsWith(root + path.sep) ? await stat(file).catch(() => null) : null;
  if (!info?.isFile()) return notFound(c, `no file at ${c.req.path}`);
  const immutable = segs[0] === "assets";
  return c.body(new Uint8Array(await readFile(file)), 200, {
    "content-type": contentType(file),
    "cache-control": immutable ? "public, max-age=31536000, immutable" : "no-cache",
    ...PAGE_SECURITY_HEADERS,
  });
}
