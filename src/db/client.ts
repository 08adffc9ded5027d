// One data layer, two backends: a Postgres server when DATABASE_URL is set, otherwise an
// embedded PGlite persisted in a folder. Both go through Prisma 7's engine-free client.
import { mkdirSync } from "node:fs";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { PrismaPg } from "@prisma/adapter-pg";
import type { SqlMigrationAwareDriverAdapterFactory } from "@prisma/driver-adapter-utils";
import pg from "pg";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { PrismaClient } from "../generated/prisma/client.ts";

export type Db = PrismaClient;
export type Tx = Parameters<Parameters<PrismaClient["$transaction"]>[0]>[0];

export type Database = {
  prisma: PrismaClient;
  kind: "postgres" | "pglite";
  adapterFactory: SqlMigrationAwareDriverAdapterFactory;
  /** LISTEN on a channel; returns an unsubscribe function. */
  listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
};

export type DatabaseOptions = { databaseUrl?: string; dataDir: string; poolSize?: number };

export async function openDatabase(opts: DatabaseOptions): Promise<Database> {
  return opts.databaseUrl ? openPostgres(opts.databaseUrl, opts.poolSize) : openPglite(opts.dataDir);
}

async function openPostgres(url: string, poolSize = 10): Promise<Database> {
  const pool = new pg.Pool({ connectionString: url, max: poolSize });
  // An idle client dying with the server (restart, failover) must not crash the process;
  // the pool replaces it on the next checkout.
  pool.on("error", () => {});
  const adapterFactory = new PrismaPg(pool);
  const prisma = new PrismaClient({ adapter: adapterFactory });
  return {
    prisma,
    kind: "postgres",
    adapterFactory: new PrismaPg(url),
    async listen(channel, onNotify) {
      const client = new pg.Client({ connectionString: url });
      client.on("error", () => {});
      await client.connect();
      client.on("notification", (n) => n.channel === channel && onNotify(n.payload ?? ""));
      await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      return async () => {
        await client.end().catch(() => {});
      };
    },
    async close() {
      await prisma.$disconnect();
      await pool.end();
    },
  };
}

async function openPglite(dataDir: string): Promise<Database> {
  const dir = dataDir.startsWith("memory://") ? dataDir : path.resolve(dataDir, "pglite");
  if (!dir.startsWith("memory://")) mkdirSync(dir, { recursive: true });
  const pglite = await PGlite.create({ dataDir: dir });
  const adapterFactory = new PrismaPGlite(pglite);
  const prisma = new PrismaClient({ adapter: adapterFactory });
  return {
    prisma,
    kind: "pglite",
    adapterFactory,
    async listen(channel, onNotify) {
      const unsub = await pglite.listen(channel, onNotify);
      return async () => unsub();
    },
    async close() {
      await prisma.$disconnect();
      await pglite.close();
    },
  };
}
