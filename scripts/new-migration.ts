// `npm run db:new-migration -- <name>`: writes the SQL that takes prisma/migrations to
// prisma/schema.prisma into a new migration folder, using an in-memory PGlite as the shadow
// database, so no server and no native engine are needed.
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { openDatabase } from "../src/db/client.ts";
import { pendingSchemaChanges, prismaDir } from "../src/db/migrations.ts";

const name = process.argv[2]?.replace(/[^a-z0-9_]/gi, "_") || "change";
const db = await openDatabase({ dataDir: "memory://" });
const sql = await pendingSchemaChanges(db.adapterFactory);
await db.close();
if (!sql) {
  console.log("schema.prisma and the migrations agree; nothing to write");
} else {
  const stamp = new Date().toISOString().replace(/\D/g, "").slice(0, 14);
  const dir = path.join(prismaDir, "migrations", `${stamp}_${name}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, "migration.sql"), sql + "\n");
  console.log(`wrote ${path.relative(process.cwd(), dir)}/migration.sql`);
}
