// The hosted sign-in and account pages (/login, /account). Placeholder: filled in by the
// hosted-pages work.
import { Hono } from "hono";
import type { Config } from "../../config.ts";
import type { AppEnv } from "../env.ts";

export function hostedPageRoutes(_config: Config) {
  return new Hono<AppEnv>();
}
