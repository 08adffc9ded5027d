// `npm start`: builds the app, listens, runs the delivery worker unless LINKGATE_WORKER=0,
// and drains on SIGTERM/SIGINT.
import { serve } from "@hono/node-server";
import { buildApp } from "./app.ts";
import { ConfigError, loadConfig } from "./config.ts";

let config;
try {
  config = loadConfig();
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(err.message);
    process.exit(1);
  }
  throw err;
}

const app = await buildApp(config);
const { logger } = app.deps;
if (app.createdKeys) {
  // Printed once, on the first start of an empty database; only their hashes are stored.
  console.log(
    `\n  Created project "default". Its keys (shown only now):\n\n` +
      `    publishable (front-end apps, safe to ship): ${app.createdKeys.publishableKey}\n` +
      `    secret (servers and the dashboard, keep it secret): ${app.createdKeys.secretKey}\n`,
  );
}

const worker = config.worker ? await import("./delivery/worker.ts").then((m) => m.startWorker({ db: app.deps.db, config, masterKey: app.deps.master, logger })) : null;

const server = serve({ fetch: (req, env) => app.fetch(req, env), port: config.port, hostname: config.host }, (info) => {
  logger.info({ port: info.port, host: config.host, database: app.deps.db.kind, worker: !!worker }, `linkgate listening on http://${config.host}:${info.port} (GraphiQL at /graphql)`);
});

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, "draining");
  // Stop accepting connections; close() resolves once in-flight requests have finished.
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await worker?.stop();
  await app.close();
  logger.info("stopped");
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
