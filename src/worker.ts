// `npm run worker`: one delivery worker alone (no HTTP). Run as many as you like, in as many
// processes as you like; they share the queue through the database.
import { loadConfig } from "./config.ts";
import { resolveMasterKey } from "./auth/master-key.ts";
import { openDatabase } from "./db/client.ts";
import { applyMigrations } from "./db/migrations.ts";
import { startWorker } from "./delivery/worker.ts";
import { createLogger } from "./log.ts";

const config = loadConfig();
const logger = createLogger(config.logLevel);
const db = await openDatabase(config);
await applyMigrations(db.adapterFactory);
const worker = startWorker({ db, config, masterKey: resolveMasterKey(config), logger });
logger.info({ workerId: worker.id, database: db.kind }, "delivery worker running");

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, "stopping: finishing or releasing in-flight deliveries");
  await worker.stop();
  await db.close();
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
