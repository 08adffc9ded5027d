// What a REST request says about its caller, read in one place for every route.
import type { Context } from "hono";
import { authenticateProject, authenticateUser, bearerToken } from "../auth/authenticate.ts";
import type { KeyActor, UserActor } from "../deps.ts";
import type { AppEnv } from "./env.ts";

function credentials(c: Context<AppEnv>) {
  return {
    apiKey: c.req.header("x-api-key"),
    bearer: bearerToken(c.req.header("authorization")),
    clientAddress: c.get("clientAddress"),
    userAgent: c.req.header("user-agent"),
  };
}

/** The project, from X-API-Key, with the key's id (apiKeyId: who acted). */
export function projectActor(c: Context<AppEnv>): Promise<KeyActor> {
  return authenticateProject(c.get("deps"), credentials(c));
}

/** The signed-in user, from the access token and X-API-Key together. */
export function userActor(c: Context<AppEnv>): Promise<UserActor> {
  return authenticateUser(c.get("deps"), credentials(c));
}
