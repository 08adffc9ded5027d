// The hosted sign-in and account pages: pages/dist (made by `npm run pages:build`) at /login and
// /account, their assets under /pages/. Each page is given the project's publishable key in a
// <meta> tag as it is served (the CSP allows no inline script); never a secret key.
import { Hono, type Context } from "hono";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Config } from "../../config.ts";
import type { AppEnv } from "../env.ts";
import { errorBody } from "../errors.ts";
import { CONTENT_TYPES, PAGE_SECURITY_HEADERS, safeSegments, serveBuiltFile } from "../static-files.ts";

const DEFAULT_ROOT = fileURLToPath(new URL("../../../pages/dist/", import.meta.url));

/** The only keys a page may be given: publishable ones, whose charset needs no escaping. */
const PUBLISHABLE = /^lg_pk_[\w-]+$/;

/** The configured key if it is a publishable one; a secret key would be public once in a page. */
export function pagesKey(config: Pick<Config, "pagesPublishableKey">): string | null {
  const key = config.pagesPublishableKey?.trim();
  return key && PUBLISHABLE.test(key) ? key : null;
}

const KEY_META = /<meta name="linkgate-publishable-key" content="[^"]*"\s*\/?>/;

/** The page with its key; an empty key makes the page say it is not configured. */
export function withKey(html: string, key: string | null): string {
  const meta = `<meta name="linkgate-publishable-key" content="${key ?? ""}" />`;
  return KEY_META.test(html) ? html.replace(KEY_META, meta) : html.replace("</head>", `${meta}</head>`);
}

const NOT_BUILT = "The sign-in pages are not built. Run `npm run pages:build` (npm install also runs it), then reload.\n";

export function hostedPageRoutes(config: Config, opts: { root?: string } = {}) {
  const root = path.resolve(opts.root ?? DEFAULT_ROOT);
  const key = pagesKey(config);
  let warned = false;
  const r = new Hono<AppEnv>();

  const page = (name: "login" | "account") => async (c: Context<AppEnv>) => {
    const html = await readFile(path.join(root, `${name}.html`), "utf8").catch(() => null);
    if (html === null) return c.text(NOT_BUILT, 503, { "cache-control": "no-store" });
    if (!key && !warned) {
      warned = true;
      c.get("log")?.warn(
        config.pagesPublishableKey ? "LINKGATE_PAGES_PUBLISHABLE_KEY is not a publishable key (lg_pk_…); the hosted pages say they are not configured" : "no publishable key for the hosted pages (LINKGATE_PAGES_PUBLISHABLE_KEY); they say they are not configured",
      );
    }
    return c.body(withKey(html, key), 200, { "content-type": CONTENT_TYPES[".html"], "cache-control": "no-cache", ...PAGE_SECURITY_HEADERS });
  };

  const asset = async (c: Context<AppEnv>) => {
    const segs = safeSegments(new URL(c.req.url).pathname.slice("/pages/".length));
    // Only the built assets: the HTML is served, with its key, at /login and /account.
    if (!segs || segs[0] !== "assets" || segs.length < 2) return c.json(errorBody("NotFound", `no page file at ${c.req.path}`), 404);
    return serveBuiltFile(c, root, segs);
  };

  r.get("/login", page("login"));
  r.get("/account", page("account"));
  r.get("/pages/*", asset);
  return r;
}
