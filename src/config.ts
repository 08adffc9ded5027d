// Configuration from the environment (CONTRACT section 1). Parsed once, validated with zod,
// and passed explicitly to buildApp so tests can build apps with their own settings.
import { z } from "zod";

const csvMs = z
  .string()
  .regex(/^\d+(,\d+)*$/, "a comma-separated list of milliseconds")
  .transform((s) => s.split(",").map(Number));

const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(4000),
  HOST: z.string().default("127.0.0.1"),
  DATABASE_URL: z.string().url().optional(),
  LINKGATE_DATA_DIR: z.string().default("./.data"),
  NODE_ENV: z.string().default("development"),
  LINKGATE_SECRET_KEY: z.string().optional(),
  LINKGATE_BOOTSTRAP_API_KEY: z.string().min(16).optional(),
  LINKGATE_ADMIN_TOKEN: z.string().min(16).optional(),
  LINKGATE_ISSUER: z.string().url().optional(),
  SMTP_URL: z.string().url().optional(),
  SMTP_FROM: z.string().default("linkgate <no-reply@localhost>"),
  SMS_WEBHOOK_URL: z.string().url().optional(),
  LINKGATE_WEBHOOK_ALLOW_PRIVATE: z.enum(["0", "1", ""]).optional(),
  LINKGATE_WEBHOOK_RETRY_SCHEDULE_MS: csvMs.default([10000, 30000, 60000, 300000, 1800000]),
  LINKGATE_WEBHOOK_TIMEOUT_MS: z.coerce.number().int().positive().default(10000),
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
  adminToken?: string;
  issuer?: string;
  smtpUrl?: string;
  smtpFrom: string;
  smsWebhookUrl?: string;
  webhookAllowPrivate: boolean;
  retryScheduleMs: number[];
  webhookTimeoutMs: number;
  worker: boolean;
  logLevel: string;
};

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
    adminToken: e.LINKGATE_ADMIN_TOKEN,
    issuer: e.LINKGATE_ISSUER,
    smtpUrl: e.SMTP_URL,
    smtpFrom: e.SMTP_FROM,
    smsWebhookUrl: e.SMS_WEBHOOK_URL,
    webhookAllowPrivate: e.LINKGATE_WEBHOOK_ALLOW_PRIVATE === "1",
    retryScheduleMs: e.LINKGATE_WEBHOOK_RETRY_SCHEDULE_MS,
    webhookTimeoutMs: e.LINKGATE_WEBHOOK_TIMEOUT_MS,
    worker: e.LINKGATE_WORKER === "1",
    logLevel: e.LOG_LEVEL,
  };
  assertProductionReady(config);
  return config;
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
