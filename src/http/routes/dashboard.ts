// The webhook dashboard's built static files (dashboard/dist, made by `npm run dashboard:build`,
// which `npm install` runs) at /dashboard and /dashboard/*. The page talks only to /graphql.
import { Hono, type Context } from "hono";
import { existsSync } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { AppEnv } from "../env.ts";
import type { Logger } from "../../log.ts";
import { notFound } from "../errors.ts";
import { CONTENT_TYPES, notBuilt, PAGE_SECURITY_HEADERS, safeSegments, serveBuiltFile, underPrefix } from "../static-files.ts";

const DEFAULT_ROOT = fileURLToPath(new URL("../../../dashboard/dist/", import.meta.url));

const NOT_BUILT = notBuilt("The dashboard is", "dashboard:build");

/** `logger`: told at start when the dashboard is not built; `prefix`: the issuer's path (src/config.ts publicPath). */
export function dashboardRoutes(opts: { root?: string; logger?: Logger; prefix?: string } = {}) {
  const root = path.resolve(opts.root ?? DEFAULT_ROOT);
  if (opts.logger && !existsSync(path.join(root, "index.html"))) opts.logger.warn(`/dashboard will answer 503: ${NOT_BUILT.trim()}`);
  const r = new Hono<AppEnv>();

  const serve = async (c: Context<AppEnv>, rest: string) => {
    const built = await stat(path.join(root, "index.html")).catch(() => null);
    if (!built?.isFile()) {
      return c.text(NOT_BUILT, 503, { "cache-control": "no-store" });
    }
    const segs = safeSegments(rest);
    if (!segs) return notFound(c, `no dashboard file at ${c.req.path}`);
    if (segs.length && !(segs.length === 1 && segs[0] === "index.html")) return serveBuiltFile(c, root, segs);
    const html = await readFile(path.join(root, "index.html"), "utf8");
    return c.body(underPrefix(html, opts.prefix ?? ""), 200, { "content-type": CONTENT_TYPES[".html"], "cache-control": "no-cache", ...PAGE_SECURITY_HEADERS });
  };

  r.get("/dashboard", (c) => serve(c, ""));
  r.get("/dashboard/*", (c) => serve(c, new URL(c.req.url).pathname.slice("/dashboard/".length)));
  return r;
}
