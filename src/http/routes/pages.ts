// The hosted sign-in and account pages: pages/dist (made by `npm run pages:build`) at /login and
// /account, their assets under /pages/. Each page is given the project's publishable key in a
// <meta> tag as it is served (the CSP allows no inline script); never a secret key.
import { Hono, type Context } from "hono";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { relyingParty } from "../../auth/passkeys.ts";
import { defaultIssuer, isPublishableKey, publicPath, type Config } from "../../config.ts";
import { activeKeyKind, developmentPagesKey } from "../../auth/projects.ts";
import type { MasterKey } from "../../crypto.ts";
import type { Db } from "../../db/client.ts";
import type { Logger } from "../../log.ts";
import type { AppEnv } from "../env.ts";
import { notFound } from "../errors.ts";
import { CONTENT_TYPES, notBuilt, PAGE_SECURITY_HEADERS, safeSegments, serveBuiltFile, underPrefix } from "../static-files.ts";

const DEFAULT_ROOT = fileURLToPath(new URL("../../../pages/dist/", import.meta.url));

/** The configured key if it is a publishable one; a secret key would be public once in a page. */
export function pagesKey(config: Pick<Config, "pagesPublishableKey">): string | null {
  const key = config.pagesPublishableKey?.trim();
  return key && isPublishableKey(key) ? key : null;
}

/**
 * What keeps the hosted pages from working, each naming the variable to set; empty when they
 * work. The pages are optional, so this is said at start rather than refused (docs/configuration.md).
 */
export function pagesProblems(config: Config, issuer: string, { key, held }: PagesKey): string[] {
  const problems: string[] = [];
  // it comes from either variable (src/config.ts): name both, or the warning names one never set
  const named = "the pages' key (LINKGATE_PAGES_PUBLISHABLE_KEY, else LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY)";
  if (key && !held) problems.push(`${named} is not an active key of any project, so every sign-in on the pages is refused`);
  if (!key) {
    problems.push(
      config.pagesPublishableKey
        ? `${named} is not a publishable key (lg_pk_…), so the pages say they are not configured`
        : "no publishable key: set LINKGATE_PAGES_PUBLISHABLE_KEY to an lg_pk_… key of the project, or the pages say they are not configured",
    );
  }
  if (config.production && !config.issuer && !config.webauthnOrigins.length) {
    problems.push(`LINKGATE_ISSUER is unset, so passkeys work only at ${issuer}: set it to the public https URL (or LINKGATE_WEBAUTHN_RP_ID and LINKGATE_WEBAUTHN_ORIGINS)`);
    return problems;
  }
  const rp = relyingParty(config, issuer);
  // every entry is an origin or an Android app's (src/config.ts checked them); the pages are web pages
  for (const origin of rp.origins.filter((o) => !o.startsWith("android:"))) {
    const host = new URL(origin).hostname;
    // Browsers offer WebAuthn only in a secure context: https, or http on localhost.
    if (!origin.startsWith("https:") && !(host === "localhost" || host.endsWith(".localhost"))) {
      problems.push(`passkeys need https: browsers refuse them at ${origin} (LINKGATE_ISSUER, LINKGATE_WEBAUTHN_ORIGINS)`);
    } else if (host !== rp.id && !host.endsWith(`.${rp.id}`)) {
      problems.push(`the passkey relying party ${rp.id} is not ${host} or a parent of it, so browsers refuse passkeys at ${origin} (LINKGATE_WEBAUTHN_RP_ID)`);
    }
  }
  return problems;
}

const KEY_META = /<meta name="linkgate-publishable-key" content="[^"]*"\s*\/?>/;

/** The page with its key; an empty key makes the page say it is not configured. */
export function withKey(html: string, key: string | null): string {
  const meta = `<meta name="linkgate-publishable-key" content="${key ?? ""}" />`;
  return KEY_META.test(html) ? html.replace(KEY_META, meta) : html.replace("</head>", `${meta}</head>`);
}

const NOT_BUILT = notBuilt("The sign-in pages are", "pages:build");

/** The key the pages are served with; `made`: made for them in development; `held`: a project holds it. */
export type PagesKey = { key: string | null; made: boolean; held: boolean };

/**
 * The configured key, else in development one made for the pages (src/auth/projects.ts), so a
 * first start serves working pages with no configuration.
 */
export async function resolvePagesKey(config: Config, db: Db, master: MasterKey): Promise<PagesKey> {
  const configured = pagesKey(config);
  if (configured) {
    const kind = await activeKeyKind(db, configured);
    // A key stored as secret stays out of the page whatever it looks like.
    return kind === "secret" ? { key: null, made: false, held: true } : { key: configured, made: false, held: kind === "publishable" };
  }
  if (config.pagesPublishableKey || config.production) return { key: null, made: false, held: false };
  const made = await developmentPagesKey(db, master);
  return { key: made?.key ?? null, made: !!made, held: !!made };
}

export type HostedPageOptions = {
  root?: string;
  /** unset: the configured key, taken to be held by a project */
  key?: PagesKey;
  /** the tokens' issuer, which passkeys default to */
  issuer?: string;
  /** told at start what keeps the pages from working */
  logger?: Logger;
};

export function hostedPageRoutes(config: Config, opts: HostedPageOptions = {}) {
  const root = path.resolve(opts.root ?? DEFAULT_ROOT);
  const pk = opts.key ?? { key: pagesKey(config), made: false, held: true };
  const key = pk.key && isPublishableKey(pk.key) ? pk.key : null;
  if (opts.logger && !existsSync(path.join(root, "login.html"))) opts.logger.warn(`/login and /account will answer 503: ${NOT_BUILT.trim()}`);
  if (opts.logger) {
    const problems = pagesProblems(config, opts.issuer ?? defaultIssuer(config), { ...pk, key });
    if (problems.length) opts.logger.warn({ problems }, `the hosted pages /login and /account will not work: ${problems.join("; ")}`);
    else if (pk.made) opts.logger.info({ prefix: key!.slice(0, 10) }, "the hosted pages use a publishable key of the project \"default\" made for them in development (LINKGATE_PAGES_PUBLISHABLE_KEY chooses another)");
  }
  const prefix = publicPath(opts.issuer ?? defaultIssuer(config));
  const r = new Hono<AppEnv>();

  const page = (name: "login" | "account") => async (c: Context<AppEnv>) => {
    const html = await readFile(path.join(root, `${name}.html`), "utf8").catch(() => null);
    if (html === null) return c.text(NOT_BUILT, 503, { "cache-control": "no-store" });
    return c.body(underPrefix(withKey(html, key), prefix), 200, { "content-type": CONTENT_TYPES[".html"], "cache-control": "no-cache", ...PAGE_SECURITY_HEADERS });
  };

  const asset = async (c: Context<AppEnv>) => {
    const segs = safeSegments(new URL(c.req.url).pathname.slice("/pages/".length));
    // Only the built assets: the HTML is served, with its key, at /login and /account.
    if (!segs || segs[0] !== "assets" || segs.length < 2) return notFound(c, `no page file at ${c.req.path}`);
    return serveBuiltFile(c, root, segs);
  };

  r.get("/login", page("login"));
  r.get("/account", page("account"));
  r.get("/pages/*", asset);
  return r;
}
