// `npm start`: builds the app, listens, runs the delivery worker unless LINKGATE_WORKER=0,
// and drains on SIGTERM/SIGINT within LINKGATE_SHUTDOWN_TIMEOUT_MS (see lifecycle.ts).
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { buildApp, type App } from "./app.ts";
import type { FirstProject } from "./auth/projects.ts";
import { claimIssuer, IssuerNotShared, type IssuerClaim } from "./auth/issuer.ts";
import { answerHalfClosedClients, closeConnectionsWhenDraining, createAppServer, stopAccepting } from "./http/server.ts";
import { defaultIssuer, localUrl, type Config } from "./config.ts";
import { databaseFault, die, ensureDatabaseReachable, ensurePortFree, listenFault, loadConfigOrDie, orDie, stopOnSignals } from "./lifecycle.ts";
import { createLogger } from "./log.ts";

const loaded = await loadConfigOrDie();
const logger = createLogger(loaded.logLevel);
// Requests are served by the app once it is built; one that came before waits for it (only
// with PORT=0, whose port nobody knows before the listening line says it).
let built: App | undefined;
let whenBuilt: (app: App) => void = () => {};
const building = new Promise<App>((resolve) => (whenBuilt = resolve));
const server = createAppServer(async (req, env) => (built ?? (await building)).fetch(req, env), { hostname: loaded.host, logger });
answerHalfClosedClients(server);
const closeConnections = closeConnectionsWhenDraining(server);
// PORT=0 asks the system for a free port, and an issuer left unset names that port (tokens'
// `iss`, discovery, links in e-mails and pages), known only once bound: so the server listens
// first, and everything that names the issuer is made after. They named http://localhost:0,
// which no one can reach (docs/configuration.md, PORT). A port of one's own is tried and let go
// instead, and listened on once the app is built.
const config = loaded.port === 0 ? { ...loaded, port: await listenOrDie(server, loaded) } : loaded;
if (loaded.port !== 0) await ensurePortFree(config);
await ensureDatabaseReachable(config);
const issuerClaim = await claimIssuerOrDie(config);

const app = await orDie(buildApp(config, { logger }));
built = app;
whenBuilt(app);
if (app.createdKeys) console.log(firstStartKeys(app.createdKeys, app.deps.db.kind));

const worker = config.worker ? await import("./delivery/worker.ts").then((m) => m.startWorker({ db: app.deps.db, config, masterKey: app.deps.master, logger })) : null;

if (loaded.port !== 0) {
  server.listen(config.port, config.host, () => {
    server.off("error", onListenFault);
    sayListening();
  });
  // A port already taken (or not ours to bind) is said in one line, after everything started is
  // let go; once listening, a server error is not a start-up fault.
  server.once("error", onListenFault);
}
// said at start, not by the first user whose code never comes (the start does not wait for it)
void app.deps.messenger.check().then((fault) => {
  if (fault === undefined) return;
  if (fault) logger.warn({ fault }, "e-mails cannot be sent: the SMTP server (SMTP_URL) could not be reached, refused linkgate's login or its TLS failed; codes by e-mail will fail until it is fixed");
  else logger.info("the SMTP server (SMTP_URL) answered the start's check");
});

stopOnSignals(logger, config.shutdownTimeoutMs, {
  async drain() {
    closeConnections();
    // Stop accepting connections (resolved once every connection has ended: stopAccepting) and
    // stop claiming deliveries, both at once: stopped only after HTTP had drained, the worker
    // went on claiming behind a slow request, and its sends ran into the deadline (31st review).
    await Promise.all([stopAccepting(server), worker?.stop()]);
    await app.close();
    await issuerClaim?.release();
  },
  async abandon() {
    server.closeAllConnections();
    await worker?.abandon();
  },
});
// Listening already: announced only now that SIGTERM drains (a supervisor that signals as soon
// as it reads the line must not meet Node's default action), as the listen callback above is.
if (loaded.port === 0) sayListening();

function sayListening(): void {
  const info = server.address() as AddressInfo;
  const pages = ["sign-in at /login", "dashboard at /dashboard", ...(config.graphiql ? ["GraphiQL at /graphql"] : [])];
  logger.info({ port: info.port, host: config.host, database: app.deps.db.kind, worker: !!worker }, `linkgate listening on ${localUrl(config.host, info.port)} (${pages.join(", ")})`);
}

/** Listens on PORT=0 before anything else is opened; the port the system picked, or the start's one line. */
async function listenOrDie(server: Server, config: Config): Promise<number> {
  const fault = await new Promise<NodeJS.ErrnoException | null>((resolve) => {
    server.once("error", resolve);
    server.listen(config.port, config.host, () => {
      server.off("error", resolve);
      resolve(null);
    });
  });
  if (fault) return die(listenFault(config, fault));
  return (server.address() as AddressInfo).port;
}

function onListenFault(err: NodeJS.ErrnoException): void {
  void stopAfterListenFault(err);
}

async function stopAfterListenFault(err: NodeJS.ErrnoException): Promise<never> {
  await worker?.stop();
  await app.close();
  await issuerClaim?.release();
  return die(listenFault(config, err));
}

/** Every gateway on a shared database names one issuer; without LINKGATE_ISSUER it must be the only one (src/auth/issuer.ts). */
async function claimIssuerOrDie(config: Config): Promise<IssuerClaim | undefined> {
  if (!config.databaseUrl) return undefined;
  try {
    return await claimIssuer(config.databaseUrl, defaultIssuer(config), !!config.issuer);
  } catch (err) {
    if (err instanceof IssuerNotShared) return die(err.message);
    // The database answered the reachability check and failed (or went silent) since.
    return die(databaseFault("take the issuer's lock on", config.databaseUrl, err));
  }
}

/**
 * Printed once, on the first start of an empty database; only the keys' hashes are stored. In
 * production that output is the log, so no secret key is made there: the command that makes one
 * prints it to the operator's terminal instead.
 */
function firstStartKeys({ projectId, publishableKey, secretKey }: FirstProject, database: "pglite" | "postgres"): string {
  // the embedded database is one process's: the CLI can open it only while the server is stopped
  const stopped = database === "pglite" ? ", with this server stopped (the embedded database is one process's)" : "";
  const secret = secretKey
    ? `    secret (servers and the dashboard, keep it secret): ${secretKey}\n`
    : `    secret (servers and the dashboard): none yet; a production start prints no secret into its log.\n` +
      `      Make one from a shell with this process's environment${stopped}; it is printed there, once:\n` +
      `      npx linkgate keys create --project ${projectId} --kind secret\n`;
  return `\n  Created project "default". Its keys (shown only now):\n\n    publishable (front-end apps, safe to ship): ${publishableKey}\n${secret}`;
}
