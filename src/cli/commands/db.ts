import type { Command } from "commander";
import { openConfiguredDatabase } from "../database.ts";
import { emit, type Io } from "../output.ts";

export function registerDb(program: Command, io: Io): void {
  const db = program.command("db").description("manage the database");

  db.command("migrate")
    .description("apply this version's pending migrations (what `npm start` does on start)")
    .option("--json", "print JSON")
    .action(async (opts: { json?: boolean }) => {
      const { applyMigrations, describeApplied } = await import("../../db/migrations.ts");
      const database = await openConfiguredDatabase(io.env, { create: true });
      let applied: string[];
      try {
        applied = await applyMigrations(database.adapterFactory);
      } finally {
        await database.close();
      }
      await emit(io, !!opts.json, { applied }, () => describeApplied(applied));
    });
}
