// What every service call needs, built once by buildApp and passed explicitly.
import type { Config } from "./config.ts";
import type { Database } from "./db/client.ts";
import type { MasterKey } from "./crypto.ts";
import type { KeyStore } from "./auth/tokens.ts";
import type { Messenger } from "./messaging/transport.ts";
import type { Logger } from "./log.ts";

export type Limits = {
  /** OTP sends per identifier */
  sendsPerIdentifier: { max: number; windowSeconds: number };
  /** OTP sends (link requests) per account */
  sendsPerAccount: { max: number; windowSeconds: number };
  /** wrong codes per identifier or per account, across states */
  failuresPerSubject: { max: number; windowSeconds: number };
};

export const defaultLimits: Limits = {
  sendsPerIdentifier: { max: 5, windowSeconds: 600 },
  sendsPerAccount: { max: 20, windowSeconds: 3600 },
  failuresPerSubject: { max: 15, windowSeconds: 3600 },
};

export type Deps = {
  config: Config;
  db: Database;
  prisma: Database["prisma"];
  master: MasterKey;
  otpKey: Buffer;
  keys: KeyStore;
  messenger: Messenger;
  logger: Logger;
  limits: Limits;
};

export type KeyKind = "secret" | "publishable";

/**
 * Who is calling: always a project, through one of its keys, from a client address (the
 * socket's peer, or X-Forwarded-For behind a trusted proxy); a signed-in user on user routes.
 */
export type Actor = { projectId: string; keyKind: KeyKind; clientAddress: string; user?: { accountId: string; sessionId: string } };
export type UserActor = Actor & { user: { accountId: string; sessionId: string } };
