// The app factory: buildApp(config) opens the database, applies migrations, loads keys and
// returns a Hono app whose fetch() tests call directly; main.ts only listens.
import { Hono, type Context, type MiddlewareHandler, type Next } from "hono";
import { cors } from "hono/cors";
import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { defaultIssuer, publicPath, type Config } from "./config.ts";
import { deriveKey } from "./crypto.ts";
import { InvalidRequest } from "./errors.ts";
import { openDatabase, type Database } from "./db/client.ts";
import { watchClock } from "./db/clock.ts";
import { withConnectionShare } from "./db/connection-share.ts";
import { applyMigrations, knownMigrations } from "./db/migrations.ts";
import type { Deps } from "./deps.ts";
import { limitsFrom, type Limits } from "./limits.ts";
import { checkMasterKey, resolveMasterKey } from "./auth/master-key.ts";
import { bootstrapProject, type FirstProject } from "./auth/projects.ts";
import { warnSharedCallbacks } from "./auth/external/providers.ts";
import { warnReceivableFirstParty } from "./oidc/clients.ts";
import { openKeyStore } from "./auth/tokens.ts";
import { createGraphQL } from "./graphql/yoga.ts";
import { graphqlRequest, limitBody } from "./http/body.ts";
import type { AppEnv } from "./http/env.ts";
import { clientAddressResolver, deviceCookie } from "./http/client-address.ts";
import { errorResponse, notFound, refuseHead } from "./http/errors.ts";
import { authRoutes } from "./http/routes/auth.ts";
import { dashboardRoutes } from "./http/routes/dashboard.ts";
import { graphiqlRoutes } from "./http/routes/graphiql.ts";
import { healthRoutes } from "./http/routes/health.ts";
import { hostedPageRoutes, resolvePagesKey, type PagesKey } from "./http/routes/pages.ts";
import { externalRoutes } from "./http/routes/external.ts";
import { linkRoutes } from "./http/routes/link.ts";
import { CLIENT_CORS_PATHS, oauthRoutes } from "./http/routes/oauth.ts";
import { httpMetrics, metricsRoutes } from "./http/routes/metrics.ts";
import { passkeyRoutes } from "./http/routes/passkey.ts";
import { webhookRoutes } from "./http/routes/webhooks.ts";
import { docsRoutes } from "./http/routes/docs.ts";
import { createLogger, inRequest, type Logger } from "./log.ts";
import { startNoticeSender } from "./auth/notices.ts";
import { startSweeper } from "./retention/sweep.ts";
import { createMessenger, type Messenger } from "./messaging/transport.ts";

/** What a gateway whose clock is off breaks (src/db/clock.ts). */
const TOKENS_BREAK = "tokens carry this gateway's time, and apps refuse an ID token issued in the future";

export type BuildOptions = {
  /** an already open database (tests); otherwise one is opened from the config */
  db?: Database;
  logger?: Logger;
  messenger?: Messenger;
  limits?: Partial<Limits>;
};

export type App = {
  /** `env` carries the Node socket (`{ incoming }`) when served by @hono/node-server */
  fetch: (req: Request, env?: unknown) => Promise<Response>;
  deps: Deps;
  /** the project created on this first start and its keys, shown once (no secret key in production) */
  createdKeys?: FirstProject;
  close(): Promise<void>;
};

export async function buildApp(config: Config, opts: BuildOptions = {}): Promise<App> {
  const logger = opts.logger ?? createLogger(config.logLevel);
  for (const warning of config.warnings ?? []) logger.warn(warning);
  const db = opts.db ?? (await openDatabase(config));
  await applyMigrations(db.adapterFactory);
  const migrations = await knownMigrations();
  const master = resolveMasterKey(config);
  await checkMasterKey(db.prisma, master, config);
  const issuer = defaultIssuer(config);
  const messenger = opts.messenger ?? createMessenger({ ...config, logger });
  const limits = { ...limitsFrom(config.abuse), ...opts.limits };
  const deps: Deps = {
    config,
    db,
    prisma: db.prisma,
    master,
    otpKey: deriveKey(master, "otp"),
    keys: await openKeyStore(db.prisma, master, issuer),
    messenger,
    notices: startNoticeSender({ db, messenger, logger, limits, scheduleMs: config.noticeRetryScheduleMs }),
    logger,
    limits,
  };
  const sweeper = startSweeper({ db, settings: config.retention, logger });
  const created = await bootstrapProject(db.prisma, { secret: config.bootstrapApiKey, publishable: config.bootstrapPublishableKey }, { secretKey: !config.production });
  await warnSharedCallbacks(deps);
  await warnReceivableFirstParty(deps);
  await watchClock(db, deps.logger, TOKENS_BREAK).check();
  const app = routes(deps, migrations, await resolvePagesKey(config, db.prisma, master));
  return {
    fetch: (req, env) => Promise.resolve(app.fetch(req, env)),
    deps,
    createdKeys: created ?? undefined,
    async close() {
      await sweeper.stop();
      await deps.notices.stop();
      deps.messenger.close();
      if (!opts.db) await db.close();
    },
  };
}

function routes(deps: Deps, migrations: string[], pagesKey: PagesKey) {
  const app = new Hono<AppEnv>();
  const yoga = createGraphQL(deps);
  const clientAddress = clientAddressResolver(deps.config.trustedProxies);

  app.use(httpMetrics());
  app.use(async (c, next) => {
    const requestId = callersRequestId(c.req.header("x-request-id")) ?? randomUUID();
    c.set("deps", deps);
    // the lines written while it is served carry the request's id (src/log.ts inRequest)
    c.set("log", deps.logger);
    c.set("requestId", requestId);
    c.set("clientAddress", clientAddress(c));
    const started = performance.now();
    await inRequest(requestId, next);
    // Set on the response's own headers: c.header() after the response is made builds a new
    // Response from it (with @hono/node-server, the web Response the adapter otherwise avoids).
    c.res.headers.set("X-Request-Id", requestId);
    // A browser that sniffs must not take an API answer (JSON holding a caller's own text) for
    // HTML or a script; the pages set it already, every other answer here (docs/rest.md).
    c.res.headers.set("X-Content-Type-Options", "nosniff");
    deps.logger.info({ requestId, method: c.req.method, path: c.req.path, status: c.res.status, ms: Math.round(performance.now() - started) }, "request");
  });
  app.use(noStoreByDefault);
  app.use(deviceCookie(deps.config.issuer));
  app.onError((err, c) => errorResponse(c, err));
  app.notFound((c) => notFound(c, `no route for ${c.req.method} ${c.req.path}`));

  app.use("/.well-known/*", cors({ origin: "*" })); // public keys and discovery, no credentials
  // The token and revocation endpoints answer CORS per client (a public client's own origins,
  // docs/oidc.md "CORS": src/http/routes/oauth.ts), so the API's origin list does not apply to them.
  const api = apiCors(deps.config.corsOrigins);
  app.use((c, next) => (CLIENT_CORS_PATHS.has(c.req.path) ? next() : api(c, next)));

  app.route("/", healthRoutes(migrations));
  app.route("/", metricsRoutes());
  app.route("/", authRoutes());
  app.route("/", linkRoutes());
  app.route("/", externalRoutes());
  app.route("/", oauthRoutes());
  app.route("/", passkeyRoutes());
  app.route("/", webhookRoutes());
  app.route("/", docsRoutes(publicPath(deps.keys.issuer)));
  app.route("/", dashboardRoutes({ logger: deps.logger, prefix: publicPath(deps.keys.issuer) }));
  app.route("/", graphiqlRoutes(deps.config));
  app.route("/", hostedPageRoutes(deps.config, { key: pagesKey, issuer: deps.keys.issuer, logger: deps.logger }));
  app.use("/graphql", graphqlRequest, limitBody);
  // each request gets its own share of the pool: sibling fields resolve at once (src/db/connection-share.ts)
  // Hono answers HEAD through the GET route and copies the answer's headers, which it cannot
  // read from yoga's own Response class: the request id and CORS headers were lost, and the
  // Headers object's internals came out as headers. A GraphQL request is never a HEAD.
  app.on(["GET", "POST", "OPTIONS"], "/graphql", refuseHead("GET, POST, OPTIONS"));
  app.on(["GET", "POST", "OPTIONS"], "/graphql", (c) => withConnectionShare(async () => yoga.fetch(c.req.raw, { clientAddress: c.get("clientAddress") })).catch(bodyAborted(c)));
  return app;
}

/**
 * The caller's X-Request-Id (its first 64 characters), if it is printable ASCII; else none, and
 * the request gets a new one (docs/rest.md, "Conventions"). Node passes the bytes 0x80 to 0xFF
 * of a header as Latin-1 characters: one such byte was echoed back in the answer's X-Request-Id
 * and written into every log line of the request as the character it stands for, C1 controls
 * (U+0085, a line break to some log readers; U+009B, a terminal's escape) included.
 */
function callersRequestId(given: string | undefined): string | undefined {
  const id = given?.slice(0, 64).trim();
  return id && /^[\x20-\x7e]+$/.test(id) ? id : undefined;
}

/**
 * yoga reads a body of declared length itself, and when its client hangs up before the body is
 * complete it rejects with the abort's reason, which need not be an Error: Hono's error handler
 * takes only Errors, so it passed every middleware (no request log, no metric) to a bare 500.
 * It is the client's doing, as for the REST routes' bodies (src/http/body.ts).
 */
function bodyAborted(c: Context<AppEnv>) {
  return (reason: unknown): never => {
    if (reason instanceof Error) throw reason;
    const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
    if (incoming && !incoming.complete) throw new InvalidRequest(`the body ended before it was complete (${String(reason)})`);
    throw new Error(String(reason));
  };
}

/**
 * Every JSON answer is about one caller: tokens, secrets, keys, their account. No browser or
 * proxy cache may keep one (RFC 6749 5.1 asks it of token responses; docs/security.md), so each
 * gets `Cache-Control: no-store` unless its route chose otherwise (the public keys and
 * discovery are cacheable on purpose).
 */
async function noStoreByDefault(c: Context<AppEnv>, next: Next) {
  await next();
  const headers = c.res.headers;
  const cacheControl = headers.get("cache-control");
  // GraphQL answers the same data as multipart/mixed or an event stream when asked (yoga marks
  // the stream no-cache, which still lets a cache store it)
  const callerData = /\bjson\b|^\s*multipart\/mixed|^\s*text\/event-stream/i.test(headers.get("content-type") ?? "");
  if (callerData && (cacheControl === null || cacheControl === "no-cache")) headers.set("Cache-Control", "no-store");
}

/**
 * Browsers may call the API only from LINKGATE_CORS_ORIGINS; unset, only from this origin (no
 * CORS headers at all). Never with credentials: every call carries its key and token in
 * headers, so no cookie or ambient credential should ride along.
 */
function apiCors(origins: string[]): MiddlewareHandler<AppEnv> {
  const allowed = new Set(origins);
  const exposed = ["X-Request-Id", "Retry-After"];
  const preflight = cors({
    origin: (origin) => (allowed.has(origin) ? origin : null),
    allowHeaders: ["Content-Type", "Authorization", "X-API-Key", "X-Request-Id"],
    allowMethods: ["GET", "POST", "OPTIONS"],
    exposeHeaders: exposed,
    credentials: false,
    maxAge: 600,
  });
  // Other requests get the same headers as hono's cors gives them, set on the response's own
  // headers once it is made: hono's cors appends Vary with c.header(), which rebuilds a finished
  // response as a web Response (see the request id above).
  return async (c, next) => {
    const origin = c.req.header("origin");
    // Only an allowed origin's preflight is answered as one: hono's cors gave every OPTIONS,
    // from any origin or none, a 204 with the allowed headers, methods and max-age, where other
    // origins get no CORS headers (docs/security.md, "CORS") and an OPTIONS that is no allowed
    // preflight is a method like any other, 404 where no route takes it (docs/rest.md).
    if (c.req.method === "OPTIONS" && origin && allowed.has(origin)) return preflight(c, next);
    await next();
    const headers = c.res.headers;
    if (origin && allowed.has(origin)) {
      headers.set("Access-Control-Allow-Origin", origin);
      headers.set("Access-Control-Expose-Headers", exposed.join(","));
    }
    headers.append("Vary", "Origin");
  };
}
