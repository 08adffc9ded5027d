// The webhook dashboard's built static files (dashboard/dist, made by `npm run dashboard:build`,
// which `npm install` runs) at /dashboard and /dashboard/*. The page talks only to /graphql.
import { Hono, type Context } from "hono";
import { stat } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { AppEnv } from "../env.ts";
import { notFound } from "../errors.ts";
import { safeSegments, serveBuiltFile } from "../static-files.ts";

const DEFAULT_ROOT = fileURLToPath(new URL("../../../dashboard/dist/", import.meta.url));

export function dashboardRoutes(opts: { root?: string } = {}) {
  const root = path.resolve(opts.root ?? DEFAULT_ROOT);
  const r = new Hono<AppEnv>();

  const serve = async (c: Context<AppEnv>, rest: string) => {
    const built = await stat(path.join(root, "index.html")).catch(() => null);
    if (!built?.isFile()) {
      return c.text("The dashboard is not built. Run `npm run dashboard:build` (npm install also runs it), then reload.\n", 503, {
        "cache-control": "no-store",
      });
    }
    const segs = safeSegments(rest);
    if (!segs) return notFound(c, `no dashboard file at ${c.req.path}`);
    return serveBuiltFile(c, root, segs.length ? segs : ["index.html"]);
  };

  r.get("/dashboard", (c) => serve(c, ""));
  r.get("/dashboard/*", (c) => serve(c, new URL(c.req.url).pathname.slice("/dashboard/".length)));
  return r;
}
