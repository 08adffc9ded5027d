// Turns request credentials into an Actor. REST and GraphQL both call this; neither checks
// credentials any other way.
import { safeEqual } from "../crypto.ts";
import type { Actor, Deps, UserActor } from "../deps.ts";
import { Forbidden, Unauthenticated } from "../errors.ts";
import { projectIdForKey } from "./projects.ts";
import { assertLiveSession } from "./sessions.ts";

export type Credentials = { apiKey?: string | null; bearer?: string | null };

export function bearerToken(authorization: string | null | undefined): string | null {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
  return m ? m[1] : null;
}

export async function authenticateProject(deps: Deps, apiKey: string | null | undefined): Promise<Actor> {
  if (!apiKey) throw new Unauthenticated("send the project API key in X-API-Key");
  const projectId = await projectIdForKey(deps.prisma, apiKey);
  if (!projectId) throw new Unauthenticated("unknown or revoked API key");
  return { projectId };
}

export async function authenticateUser(deps: Deps, creds: Credentials): Promise<UserActor> {
  const { projectId } = await authenticateProject(deps, creds.apiKey);
  if (!creds.bearer) throw new Unauthenticated("send the access token as Authorization: Bearer <token>");
  const { sub, aud, sid } = await deps.keys.verifyAccessToken(creds.bearer);
  if (aud !== projectId) throw new Forbidden("this access token belongs to another project");
  await assertLiveSession(deps.prisma, projectId, sid, sub);
  return { projectId, user: { accountId: sub, sessionId: sid } };
}

/** Userinfo takes the token alone, like any OIDC userinfo endpoint. */
export async function authenticateToken(deps: Deps, bearer: string | null): Promise<UserActor> {
  if (!bearer) throw new Unauthenticated("send the access token as Authorization: Bearer <token>");
  const { sub, aud, sid } = await deps.keys.verifyAccessToken(bearer);
  await assertLiveSession(deps.prisma, aud, sid, sub);
  return { projectId: aud, user: { accountId: sub, sessionId: sid } };
}

export function isAdmin(deps: Deps, token: string | null | undefined): boolean {
  return !!deps.config.adminToken && !!token && safeEqual(token, deps.config.adminToken);
}
