import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { isConnectionFailure } from "../../db/faults.ts";
import { pendingMigrations } from "../../db/applied-migrations.ts";
import { ServiceUnavailable } from "../../errors.ts";
import type { AppEnv } from "../env.ts";
import { ok } from "../api-schemas.ts";

const tags = ["Health"];

const healthz = createRoute({
  tags,
  method: "get",
  path: "/healthz",
  operationId: "healthz",
  summary: "Liveness: the process answers",
  responses: ok(z.object({ status: z.literal("ok") }), "alive"),
});

// Not the error shape: load balancers and people read these, and they say what is missing.
const NotReady = z
  .union([
    z.object({ status: z.literal("migrations pending"), applied: z.number().int(), expected: z.number().int() }),
    z.object({ status: z.enum(["database unreachable", "database read-only", "database check failed"]) }),
  ])
  .openapi("NotReady");

const readyz = createRoute({
  tags,
  method: "get",
  path: "/readyz",
  operationId: "readyz",
  summary: "Readiness: the database answers, takes writes, and every migration of this build is applied",
  responses: {
    ...ok(z.object({ status: z.literal("ready"), migrations: z.number().int() }), "ready"),
    503: {
      description: "not ready; Retry-After is sent when the database cannot be reached",
      headers: { "Retry-After": { description: "seconds to wait before asking again", schema: { type: "integer" as const, minimum: 1 } } },
      content: { "application/json": { schema: NotReady } },
    },
  },
});

/** `knownMigrations`: this build's migrations (src/db/migrations.ts, knownMigrations). */
export function healthRoutes(knownMigrations: string[]) {
  const r = new OpenAPIHono<AppEnv>();
  r.openapi(healthz, (c) => c.json({ status: "ok" as const }, 200));
  // Ready means the database answers and every migration of this build is applied: the rule
  // startup applies migrations by (pendingMigrations), so the two cannot disagree.
  r.openapi(readyz, async (c) => {
    try {
      const pending = await pendingMigrations(c.get("deps").prisma, knownMigrations);
      const expected = knownMigrations.length;
      const applied = expected - pending.length;
      if (pending.length > 0) return c.json({ status: "migrations pending" as const, applied, expected }, 503);
      // A server that answers reads and refuses every write (a standby the URL reached after a
      // failover, default_transaction_read_only set on the database or role) failed every
      // sign-in while this said ready (docs/operations.md, "Database connections").
      const [{ read_only }] = await c.get("deps").prisma.$queryRaw<{ read_only: boolean }[]>`SELECT current_setting('transaction_read_only')::boolean AS read_only`;
      if (read_only) {
        c.get("log")?.error("database read-only");
        return c.json({ status: "database read-only" as const }, 503, { "Retry-After": String(new ServiceUnavailable().retryAfterSeconds) });
      }
      return c.json({ status: "ready" as const, migrations: applied }, 200);
    } catch (err) {
      // Load balancers poll this: an outage is expected here, anything else is worth a look.
      const status = isConnectionFailure(err) ? ("database unreachable" as const) : ("database check failed" as const);
      if (status === "database unreachable") c.get("log")?.warn({ err }, status);
      else c.get("log")?.error({ err }, status);
      return c.json({ status }, 503, { "Retry-After": String(new ServiceUnavailable().retryAfterSeconds) });
    }
  });
  return r;
}
