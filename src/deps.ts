// What every service call needs, built once by buildApp and passed explicitly.
import type { Config } from "./config.ts";
import type { Limits } from "./limits.ts";
import type { Database } from "./db/client.ts";
import type { MasterKey } from "./crypto.ts";
import type { JWK } from "jose";
import type { Messenger } from "./messaging/transport.ts";
import type { Logger } from "./log.ts";
import { SecretKeyRequired } from "./errors.ts";

export type Claims = Record<string, unknown>;

/**
 * A verified access token. `clientId` and `scopes` are present only on tokens the OpenID
 * Connect provider issued to an OAuth app; linkgate's own sign-in tokens carry neither.
 */
export type VerifiedAccessToken = { sub: string; aud: string; sid: string; clientId?: string; scopes?: string[] };

/** Token signing and verification (src/auth/tokens.ts implements it). */
export type KeyStore = {
  issuer: string;
  jwks(): { keys: JWK[] };
  sign(claims: Claims, opts: { subject: string; audience: string; ttlSeconds: number }): Promise<string>;
  verifyAccessToken(token: string): Promise<VerifiedAccessToken>;
};

/** Sends queued security notices (src/auth/notices.ts); kick() after committing some. */
export type NoticeSender = { kick(): void; stop(): Promise<void> };

export type Deps = {
  config: Config;
  db: Database;
  prisma: Database["prisma"];
  master: MasterKey;
  otpKey: Buffer;
  keys: KeyStore;
  messenger: Messenger;
  /** sends queued security notices; kick() after committing some */
  notices: NoticeSender;
  logger: Logger;
  limits: Limits;
};

export type KeyKind = "secret" | "publishable";

/**
 * Who is calling: always a project, through one of its keys, from a client address (the
 * socket's peer, or X-Forwarded-For behind a trusted proxy); a signed-in user on user routes.
 */
export type Actor = {
  projectId: string;
  keyKind: KeyKind;
  clientAddress: string;
  userAgent?: string;
  user?: SignedInUser;
  /** The API key it came with (api_keys.id), to record who acted; absent for an access token alone. */
  apiKeyId?: string;
};
/** An actor that came with an API key: every one but an access token's alone (userinfo). */
export type KeyActor = Actor & { apiKeyId: string };

/**
 * Operations about the project itself (webhooks, deliveries, events) need its secret key: each
 * such service asks here, so no transport can forget it (docs/security.md).
 */
export function requireSecretKey<A extends Actor>(actor: A): A {
  if (actor.keyKind !== "secret") throw new SecretKeyRequired();
  return actor;
}
/**
 * `authTime`: the session's last sign-in or re-authentication; `authAgeMs`: how long before the
 * request that was, by the database's clock (src/auth/recent-auth.ts judges it). `app`: the OAuth client whose
 * access token this is, with the scopes the user granted it (userinfo answers their claims; past
 * userinfo only a first-party app's token gets this far); none for a token of linkgate's own
 * sign-in, which reaches every claim. Tokens re-issued for the session keep it (src/auth/sign-in.ts).
 */
export type SignedInUser = { accountId: string; sessionId: string; authTime: Date; authAgeMs: number; app?: AppGrant };
export type AppGrant = { clientId: string; scopes: string[] };
export type UserActor = Actor & { user: SignedInUser };
