import { Hono } from "hono";
import { isConnectionFailure } from "../../db/faults.ts";
import { ServiceUnavailable } from "../../errors.ts";
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
    } catch (err) {
      // Load balancers poll this: an outage is expected here, anything else is worth a look.
      const status = isConnectionFailure(err) ? "database unreachable" : "database check failed";
      if (status === "database unreachable") c.get("log")?.warn({ err }, status);
      else c.get("log")?.error({ err }, status);
      return c.json({ status }, 503, { "Retry-After": String(new ServiceUnavailable().retryAfterSeconds) });
    }
  });
  return r;
}
