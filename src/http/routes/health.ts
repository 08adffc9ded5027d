import { Hono } from "hono";
import type { AppEnv } from "../env.ts";

export function healthRoutes(expectedMigrations: number) {
  const r = new Hono<AppEnv>();
  r.get("/healthz", (c) => c.json({ status: "ok" }));
  // Ready means the database answers and every migration of this build is applied.
  r.get("/readyz", async (c) => {
    try {
      const rows = await c.get("deps").prisma.$queryRaw<{ n: number }[]>`
        SELECT count(*)::int AS n FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL`;
      const applied = rows[0]?.n ?? 0;
      if (applied < expectedMigrations) return c.json({ status: "migrations pending", applied, expected: expectedMigrations }, 503);
      return c.json({ status: "ready", migrations: applied });
    } catch {
      return c.json({ status: "database unreachable" }, 503);
    }
  });
  return r;
}
