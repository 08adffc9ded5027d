// `npm run db:migrate`: applies pending migrations to the configured database and exits.
import { ensureDatabaseReachable, loadConfigOrDie, orDie } from "../lifecycle.ts";
import { openDatabase } from "./client.ts";
import { applyMigrations, describeApplied } from "./migrations.ts";

const config = await loadConfigOrDie();
await ensureDatabaseReachable(config);
const db = await orDie(openDatabase(config));
try {
  const applied = await orDie(applyMigrations(db.adapterFactory));
  console.log(describeApplied(applied));
} finally {
  await db.close();
}
// Prisma's WASM schema engine leaves a 10 s timer behind; nothing else is pending here.
process.exit(0);
