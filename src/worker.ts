// `npm run worker`: one delivery worker alone (no HTTP). Run as many as you like, in as many
// processes as you like; they share the queue through the database. Stops like `npm start`
// (see lifecycle.ts).
import { checkMasterKey, resolveMasterKey } from "./auth/master-key.ts";
import { openDatabase } from "./db/client.ts";
import { applyMigrations } from "./db/migrations.ts";
import { startWorker } from "./delivery/worker.ts";
import { ensureDatabaseReachable, loadConfigOrDie, orDie, stopOnSignals } from "./lifecycle.ts";
import { createLogger } from "./log.ts";

const config = await loadConfigOrDie();
const logger = createLogger(config.logLevel);
await ensureDatabaseReachable(config);
const db = await orDie(openDatabase(config));
await orDie(applyMigrations(db.adapterFactory));
const masterKey = await orDie(Promise.resolve().then(() => resolveMasterKey(config)));
await orDie(checkMasterKey(db.prisma, masterKey, config));
const worker = startWorker({ db, config, masterKey, logger });
stopOnSignals(logger, config.shutdownTimeoutMs, {
  async drain() {
    await worker.stop();
    await db.close();
  },
  abandon: () => worker.abandon(),
});
// Announced only once SIGTERM drains: a supervisor that signals as soon as it reads this line
// must not meet Node's default action (killed at once, leases left to run out).
logger.info({ workerId: worker.id, database: db.kind }, "delivery worker running");
