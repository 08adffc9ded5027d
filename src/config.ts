// Configuration from the environment (docs/configuration.md). Parsed once, validated with zod,
// and passed explicitly to buildApp so tests can build apps with their own settings.
import { z } from "zod";

const csvMs = z
  .string()
  .regex(/^\d+(,\d+)*$/, "a comma-separated list of milliseconds")
  .transform((s) => s.split(",").map(Number));

/** Webhooks a project may hold unless LINKGATE_WEBHOOKS_PER_PROJECT says otherwise (src/webhooks/service.ts says why). */
export const DEFAULT_WEBHOOKS_PER_PROJECT = 20;

const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(4000),
  HOST: z.string().default("127.0.0.1"),
  DATABASE_URL: z.string().url().optional(),
  LINKGATE_DATA_DIR: z.string().default("./.data"),
  NODE_ENV: z.string().default("development"),
  LINKGATE_SECRET_KEY: z
    .string()
    .refine((key) => Buffer.from(key, "base64").length >= 32, "must be at least 32 bytes, base64-encoded (openssl rand -base64 32)")
    .optional(),
  LINKGATE_BOOTSTRAP_API_KEY: z.string().min(16).optional(),
  LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY: z.string().min(16).optional(),
  LINKGATE_TRUSTED_PROXIES: z.string().optional(),
  LINKGATE_CORS_ORIGINS: z.string().optional(),
  // Abuse limits (docs/security.md); windows are fixed, counts per window.
  LINKGATE_LIMIT_SENDS_PER_IDENTIFIER_ADDRESS: z.coerce.number().int().positive().default(5),
  LINKGATE_LIMIT_SENDS_PER_ADDRESS_HOURLY: z.coerce.number().int().positive().default(30),
  LINKGATE_LIMIT_SMS_PER_PROJECT_HOURLY: z.coerce.number().int().positive().default(500),
  LINKGATE_LIMIT_EMAILS_PER_PROJECT_HOURLY: z.coerce.number().int().positive().default(5000),
  LINKGATE_LIMIT_WRONG_CODES_PER_IDENTIFIER_ADDRESS: z.coerce.number().int().positive().default(15),
  LINKGATE_LIMIT_WRONG_CODES_PER_IDENTIFIER_HOURLY: z.coerce.number().int().positive().default(100),
  LINKGATE_LIMIT_NOTICES_PER_DESTINATION: z.coerce.number().int().positive().default(5),
  LINKGATE_LIMIT_NOTICES_PER_ACCOUNT_HOURLY: z.coerce.number().int().positive().default(20),
  // GraphQL operation limits, checked before execution.
  LINKGATE_GRAPHQL_MAX_DEPTH: z.coerce.number().int().positive().default(12),
  LINKGATE_GRAPHQL_MAX_ALIASES: z.coerce.number().int().positive().default(30),
  LINKGATE_GRAPHQL_MAX_TOKENS: z.coerce.number().int().positive().default(2000),
  LINKGATE_GRAPHQL_MAX_DIRECTIVES: z.coerce.number().int().positive().default(20),
  LINKGATE_GRAPHQL_MAX_COST: z.coerce.number().int().positive().default(5000),
  LINKGATE_GRAPHIQL: z.enum(["0", "1"]).optional(),
  LINKGATE_WEBAUTHN_RP_ID: z.string().optional(),
  LINKGATE_WEBAUTHN_ORIGINS: z.string().optional(),
  LINKGATE_PAGES_PUBLISHABLE_KEY: z.string().optional(),
  LINKGATE_METRICS_TOKEN: z.string().min(16).optional(),
  LINKGATE_RETENTION_EVENTS_DAYS: z.coerce.number().int().positive().max(3650).default(30),
  LINKGATE_RETENTION_DELIVERY_LOG_DAYS: z.coerce.number().int().positive().max(3650).default(30),
  LINKGATE_RETENTION_SWEEP_SECONDS: z.coerce.number().int().min(0).max(86400).default(60),
  LINKGATE_RECENT_AUTH_SECONDS: z.coerce.number().int().positive().default(600),
  LINKGATE_SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().positive().default(30000),
  LINKGATE_ADMIN_TOKEN: z.string().min(16).optional(),
  LINKGATE_ISSUER: z.string().url().optional(),
  SMTP_URL: z.string().url().optional(),
  SMTP_FROM: z.string().default("linkgate <no-reply@localhost>"),
  SMS_WEBHOOK_URL: z.string().url().optional(),
  LINKGATE_WEBHOOK_ALLOW_PRIVATE: z.enum(["0", "1", ""]).optional(),
  LINKGATE_WEBHOOK_RETRY_SCHEDULE_MS: csvMs.default([10000, 30000, 60000, 300000, 1800000]),
  LINKGATE_NOTICE_RETRY_SCHEDULE_MS: csvMs.default([30000, 120000, 600000, 3600000, 21600000]),
  LINKGATE_WEBHOOK_TIMEOUT_MS: z.coerce.number().int().positive().default(10000),
  LINKGATE_WEBHOOKS_PER_PROJECT: z.coerce.number().int().positive().default(DEFAULT_WEBHOOKS_PER_PROJECT),
  LINKGATE_UPSTREAM_TIMEOUT_MS: z.coerce.number().int().positive().max(60000).default(5000),
  LINKGATE_WEBHOOK_BREAKER_FAILURES: z.coerce.number().int().positive().default(5),
  LINKGATE_WEBHOOK_BREAKER_OPEN_MS: z.coerce.number().int().positive().default(1000),
  LINKGATE_WEBHOOK_BREAKER_MAX_OPEN_MS: z.coerce.number().int().positive().default(60000),
  LINKGATE_WORKER: z.enum(["0", "1"]).default("1"),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
});

export type Config = {
  port: number;
  host: string;
  databaseUrl?: string;
  dataDir: string;
  production: boolean;
  /** base64 master key; undefined means "generate or load a development key" */
  secretKey?: string;
  bootstrapApiKey?: string;
  bootstrapPublishableKey?: string;
  /** CIDRs (or addresses) whose X-Forwarded-For names the client */
  trustedProxies: string[];
  /** origins allowed to call the API from a browser; empty: same origin only */
  corsOrigins: string[];
  abuse: AbuseLimits;
  graphqlLimits: { maxDepth: number; maxAliases: number; maxTokens: number; maxDirectives: number; maxCost: number };
  /** GraphiQL and introspection; off by default in production */
  graphiql: boolean;
  shutdownTimeoutMs: number;
  /** passkey relying party id; unset: the issuer's host (see defaultIssuer) */
  webauthnRpId?: string;
  /** origins allowed in passkey ceremonies; empty: the issuer's origin */
  webauthnOrigins: string[];
  /**
   * the publishable key the hosted /login and /account pages use; unset: the bootstrap
   * publishable key, else (development only) one the app makes for the default project
   */
  pagesPublishableKey?: string;
  /** how long events (with their deliveries) and delivery attempts are kept */
  /** sweepSeconds: how often this process sweeps; 0 leaves sweeping to other processes */
  retention: { eventsDays: number; deliveryLogDays: number; sweepSeconds: number };
  /** bearer token for /metrics; unset: metrics are served to loopback clients only */
  metricsToken?: string;
  /** how recent a session's sign-in must be for sensitive operations */
  recentAuthSeconds: number;
  adminToken?: string;
  issuer?: string;
  smtpUrl?: string;
  smtpFrom: string;
  smsWebhookUrl?: string;
  webhookAllowPrivate: boolean;
  retryScheduleMs: number[];
  webhookTimeoutMs: number;
  /** webhooks one project may hold (src/webhooks/service.ts createWebhook says why) */
  webhooksPerProject: number;
  /** how long one request to an external identity provider may take (docs/external-identities.md) */
  upstreamTimeoutMs: number;
  /** per-endpoint circuit breaker of the delivery worker (src/delivery/breaker.ts) */
  webhookBreaker: { failures: number; openMs: number; maxOpenMs: number };
  /** delays before security notices are retried */
  noticeRetryScheduleMs: number[];
  worker: boolean;
  logLevel: string;
};

export type AbuseLimits = {
  sendsPerIdentifierAddress: number;
  sendsPerAddressHourly: number;
  smsPerProjectHourly: number;
  emailsPerProjectHourly: number;
  wrongCodesPerIdentifierAddress: number;
  wrongCodesPerIdentifierHourly: number;
  /** security notices per destination and 10 minutes */
  noticesPerDestination: number;
  noticesPerAccountHourly: number;
};

const list = (s: string | undefined) =>
  (s ?? "")
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = envSchema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== "")));
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n  ${lines.join("\n  ")}`);
  }
  const e = parsed.data;
  const config: Config = {
    port: e.PORT,
    host: e.HOST,
    databaseUrl: e.DATABASE_URL,
    dataDir: e.LINKGATE_DATA_DIR,
    production: e.NODE_ENV === "production",
    secretKey: e.LINKGATE_SECRET_KEY,
    bootstrapApiKey: e.LINKGATE_BOOTSTRAP_API_KEY,
    bootstrapPublishableKey: e.LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY,
    trustedProxies: list(e.LINKGATE_TRUSTED_PROXIES),
    corsOrigins: list(e.LINKGATE_CORS_ORIGINS),
    abuse: {
      sendsPerIdentifierAddress: e.LINKGATE_LIMIT_SENDS_PER_IDENTIFIER_ADDRESS,
      sendsPerAddressHourly: e.LINKGATE_LIMIT_SENDS_PER_ADDRESS_HOURLY,
      smsPerProjectHourly: e.LINKGATE_LIMIT_SMS_PER_PROJECT_HOURLY,
      emailsPerProjectHourly: e.LINKGATE_LIMIT_EMAILS_PER_PROJECT_HOURLY,
      wrongCodesPerIdentifierAddress: e.LINKGATE_LIMIT_WRONG_CODES_PER_IDENTIFIER_ADDRESS,
      wrongCodesPerIdentifierHourly: e.LINKGATE_LIMIT_WRONG_CODES_PER_IDENTIFIER_HOURLY,
      noticesPerDestination: e.LINKGATE_LIMIT_NOTICES_PER_DESTINATION,
      noticesPerAccountHourly: e.LINKGATE_LIMIT_NOTICES_PER_ACCOUNT_HOURLY,
    },
    graphqlLimits: {
      maxDepth: e.LINKGATE_GRAPHQL_MAX_DEPTH,
      maxAliases: e.LINKGATE_GRAPHQL_MAX_ALIASES,
      maxTokens: e.LINKGATE_GRAPHQL_MAX_TOKENS,
      maxDirectives: e.LINKGATE_GRAPHQL_MAX_DIRECTIVES,
      maxCost: e.LINKGATE_GRAPHQL_MAX_COST,
    },
    graphiql: e.LINKGATE_GRAPHIQL ? e.LINKGATE_GRAPHIQL === "1" : e.NODE_ENV !== "production",
    shutdownTimeoutMs: e.LINKGATE_SHUTDOWN_TIMEOUT_MS,
    webauthnRpId: e.LINKGATE_WEBAUTHN_RP_ID,
    webauthnOrigins: list(e.LINKGATE_WEBAUTHN_ORIGINS),
    recentAuthSeconds: e.LINKGATE_RECENT_AUTH_SECONDS,
    metricsToken: e.LINKGATE_METRICS_TOKEN,
    retention: {
      eventsDays: e.LINKGATE_RETENTION_EVENTS_DAYS,
      deliveryLogDays: e.LINKGATE_RETENTION_DELIVERY_LOG_DAYS,
      sweepSeconds: e.LINKGATE_RETENTION_SWEEP_SECONDS,
    },
    pagesPublishableKey: e.LINKGATE_PAGES_PUBLISHABLE_KEY ?? e.LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY,
    adminToken: e.LINKGATE_ADMIN_TOKEN,
    issuer: e.LINKGATE_ISSUER,
    smtpUrl: e.SMTP_URL,
    smtpFrom: e.SMTP_FROM,
    smsWebhookUrl: e.SMS_WEBHOOK_URL,
    webhookAllowPrivate: e.LINKGATE_WEBHOOK_ALLOW_PRIVATE === "1",
    retryScheduleMs: e.LINKGATE_WEBHOOK_RETRY_SCHEDULE_MS,
    webhookTimeoutMs: e.LINKGATE_WEBHOOK_TIMEOUT_MS,
    webhooksPerProject: e.LINKGATE_WEBHOOKS_PER_PROJECT,
    upstreamTimeoutMs: e.LINKGATE_UPSTREAM_TIMEOUT_MS,
    webhookBreaker: {
      failures: e.LINKGATE_WEBHOOK_BREAKER_FAILURES,
      openMs: e.LINKGATE_WEBHOOK_BREAKER_OPEN_MS,
      maxOpenMs: Math.max(e.LINKGATE_WEBHOOK_BREAKER_OPEN_MS, e.LINKGATE_WEBHOOK_BREAKER_MAX_OPEN_MS),
    },
    noticeRetryScheduleMs: e.LINKGATE_NOTICE_RETRY_SCHEDULE_MS,
    worker: e.LINKGATE_WORKER === "1",
    logLevel: e.LOG_LEVEL,
  };
  assertProductionReady(config);
  // Set on purpose for the pages, yet unusable there: production refuses rather than serve
  // pages that only say they are not configured (a secret key is never put in a page).
  if (config.production && e.LINKGATE_PAGES_PUBLISHABLE_KEY && !isPublishableKey(e.LINKGATE_PAGES_PUBLISHABLE_KEY)) {
    throw new ConfigError("LINKGATE_PAGES_PUBLISHABLE_KEY must be a publishable key (lg_pk_…): it is written into the hosted pages, where anyone can read it");
  }
  return config;
}

/** A publishable key's shape; its charset needs no escaping in HTML. */
export function isPublishableKey(key: string): boolean {
  return /^lg_pk_[\w-]+$/.test(key.trim());
}

// Production must never silently log OTPs or invent a master key.
export function assertProductionReady(config: Config): void {
  if (!config.production) return;
  const missing: string[] = [];
  if (!config.secretKey) missing.push("LINKGATE_SECRET_KEY");
  if (!config.smtpUrl) missing.push("SMTP_URL");
  if (!config.smsWebhookUrl) missing.push("SMS_WEBHOOK_URL");
  if (missing.length) throw new ConfigError(`NODE_ENV=production needs ${missing.join(", ")}`);
}

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|::1|\[::1\])$/i;

/** 127.0.0.0/8, ::1 and localhost: addresses only this machine reaches. */
export function isLoopbackHost(host: string): boolean {
  return LOOPBACK.test(host);
}

/**
 * The URL to give people for HOST and a port. A loopback address is named `localhost`: browsers
 * allow passkeys there over plain HTTP (a secure context whose host is a valid RP id), never at
 * http://127.0.0.1 (docs/configuration.md, LINKGATE_ISSUER).
 */
export function localUrl(host: string, port: number): string {
  if (isLoopbackHost(host)) return `http://localhost:${port}`;
  return `http://${host.includes(":") && !host.startsWith("[") ? `[${host}]` : host}:${port}`;
}

/**
 * LINKGATE_ISSUER, else the printed address: tokens' `iss`, the discovery document and the
 * passkey relying party all name the place the first start tells people to open.
 */
export function defaultIssuer(config: Pick<Config, "issuer" | "host" | "port">): string {
  return config.issuer ?? localUrl(config.host, config.port);
}
