// GraphiQL's static assets, served from installed packages (never a CDN).
// Placeholder: filled in by the GraphiQL work.
import { Hono } from "hono";
import type { Config } from "../../config.ts";
import type { AppEnv } from "../env.ts";

export function graphiqlRoutes(_config: Config) {
  return new Hono<AppEnv>();
}
