// Configuration from the environment (docs/configuration.md). Parsed once, validated with zod,
// and passed explicitly to buildApp so tests can build apps with their own settings.
import { isSupportedCountry } from "libphonenumber-js/max";
import addressparser from "nodemailer/lib/addressparser";
import proxyaddr from "proxy-addr";
import { z } from "zod";

/**
 * The longest delay a retry schedule may give: 7 days. Delays are stored as milliseconds in a
 * 32-bit integer with up to 20 % of jitter on top, and a 30-day entry was accepted, then failed
 * every record of an attempt for as long as the worker ran (31st review).
 */
const MAX_RETRY_DELAY_MS = 7 * 24 * 3600_000;

const csvMs = z
  .string()
  .regex(/^\d+(,\d+)*$/, "must be a comma-separated list of milliseconds")
  .transform((s) => s.split(",").map(Number))
  .refine((delays) => delays.every((ms) => ms <= MAX_RETRY_DELAY_MS), `must give no delay over ${MAX_RETRY_DELAY_MS} (7 days)`);

const list = (s: string | undefined) =>
  (s ?? "")
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);

/**
 * A whole number from min to max, written in decimal digits, refused in plain words ("must be a
 * whole number from 1 to 3650"). Only digits: Number() also reads `0x50`, `8e1` and `0b1`, and
 * PORT=0x50 listened on port 80 (32nd review).
 */
function whole(min: number, max?: number) {
  const range = max === undefined ? `of at least ${min}` : `from ${min} to ${max}`;
  const error = `must be a whole number ${range}`;
  const n = z.number({ error }).int({ error }).min(min, { error });
  return z
    .string({ error })
    .trim()
    .regex(/^\d+$/, { error })
    .transform(Number)
    .pipe(max === undefined ? n : n.max(max, { error }));
}

/** Each comma-separated entry must be an address or CIDR range proxy-addr understands (or one of its names: loopback, linklocal, uniquelocal). */
const proxies = z.string().superRefine((value, ctx) => {
  try {
    proxyaddr.compile(list(value));
  } catch (err) {
    ctx.addIssue({ code: "custom", message: `must be a comma-separated list of IP addresses or CIDR ranges (10.0.0.0/8, fd00::/8), or loopback, linklocal, uniquelocal (${(err as Error).message})` });
  }
});

/**
 * Each comma-separated entry must be an origin exactly as browsers send it, since the Origin
 * header is compared with it as it is: scheme, host and port, no path. Apps' own schemes
 * (capacitor://localhost, chrome-extension://<id>) count, though URL gives them no origin.
 */
const origins = z.string().superRefine((value, ctx) => {
  for (const entry of list(value)) {
    const fault = originFault(entry);
    if (fault) ctx.addIssue({ code: "custom", message: `must list origins as browsers send them, like https://app.example.com: ${JSON.stringify(entry)} ${fault}` });
  }
});

const countries = z.string().superRefine((value, ctx) => {
  for (const entry of list(value)) {
    if (!/^[A-Za-z]{2}$/.test(entry) || !isSupportedCountry(entry.toUpperCase())) {
      ctx.addIssue({ code: "custom", message: `must list ISO 3166 country codes, like US,CA,GB: ${JSON.stringify(entry)} is not one` });
    }
  }
});

/**
 * The passkey relying party id is a host name: browsers compare it with the page's host, so a
 * URL or a port in it fails every ceremony (it was only warned about once the pages started).
 */
const rpId = z.string().superRefine((value, ctx) => {
  const id = value.trim();
  if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(id)) {
    const hint = /^[a-z]+:\/\//i.test(id) ? `, like ${safeHost(id) ?? "example.com"}` : ", like example.com";
    ctx.addIssue({ code: "custom", message: `must be a host name in lower case with no scheme, port or path${hint}: ${JSON.stringify(id)} is not one` });
  }
});

/**
 * Passkey origins: web origins as browsers send them, or an Android app's
 * `android:apk-key-hash:<hash>` (the origin its passkey responses carry).
 */
const passkeyOrigins = z.string().superRefine((value, ctx) => {
  for (const entry of list(value)) {
    if (/^android:apk-key-hash:[A-Za-z0-9_-]+$/.test(entry)) continue;
    const fault = originFault(entry);
    if (fault) ctx.addIssue({ code: "custom", message: `must list origins as browsers send them, like https://example.com: ${JSON.stringify(entry)} ${fault}` });
  }
});

function safeHost(url: string): string | undefined {
  try {
    return new URL(url).hostname || undefined;
  } catch {
    return undefined;
  }
}

function originFault(entry: string): string | undefined {
  if (entry.includes("*")) return "has a wildcard, which never matches: list each origin";
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    return "is not one";
  }
  if (url.protocol === "http:" || url.protocol === "https:") {
    return url.origin === entry ? undefined : `is not one (did you mean ${url.origin}?)`;
  }
  // browsers send the scheme in lower case, and an origin has no user or password
  return /^[a-z][a-z0-9+.-]*:\/\/[^/?#\s@]+$/.test(entry) ? undefined : "is not one (a lower-case scheme, a host, no path or trailing slash)";
}

/**
 * The SMTP URL's documented query values (docs/configuration.md, `SMTP_URL`): milliseconds, and
 * the pool's size. nodemailer hands a timeout to Node's resolver as it is: `connectionTimeout=-5`
 * or `=abc` threw out of the start's SMTP check and killed the running gateway with a stack
 * trace, and `sendTimeout=1e99` timed every send out at once. Said without the URL (it holds
 * the password).
 */
const SMTP_QUERY_MS = ["connectionTimeout", "greetingTimeout", "socketTimeout", "sendTimeout"];
/** Node's timers fire at once past this (about 24.8 days). */
const MAX_TIMER_MS = 2_147_483_647;
function smtpQueryFaults(value: string, ctx: z.RefinementCtx<string>): void {
  let query: URLSearchParams;
  try {
    query = new URL(value).searchParams;
  } catch {
    return; // refused as not a URL already
  }
  for (const name of [...SMTP_QUERY_MS, "maxConnections"]) {
    const given = query.get(name);
    if (given === null) continue;
    const ms = SMTP_QUERY_MS.includes(name);
    if (!/^\d+$/.test(given) || Number(given) < 1 || (ms && Number(given) > MAX_TIMER_MS)) {
      ctx.addIssue({ code: "custom", message: ms ? `must have ${name} in its query as a whole number of milliseconds from 1 to ${MAX_TIMER_MS}` : `must have ${name} in its query as a whole number of at least 1` });
    }
  }
}

/** Webhooks a project may hold unless LINKGATE_WEBHOOKS_PER_PROJECT says otherwise (src/webhooks/service.ts says why). */
export const DEFAULT_WEBHOOKS_PER_PROJECT = 20;

/** Identity providers a project may hold unless LINKGATE_IDENTITY_PROVIDERS_PER_PROJECT says otherwise (src/auth/external/providers.ts says why). */
export const DEFAULT_IDENTITY_PROVIDERS_PER_PROJECT = 20;

// Tokens are compared with what a request's header carries, which HTTP trims: a token set with
// a space around it (a quoted .env line, a copied value) never matched (33rd review).
const envSchema = z.object({
  PORT: whole(0, 65535).default(4000),
  HOST: z.string().default("127.0.0.1"),
  // the scheme checked here: a URL without its `//` (postgres:/user:pw@host) carries its
  // password in the path, where neither the driver nor the start-up error's masking looks for it
  DATABASE_URL: z
    .string()
    .url({ error: "must be a URL" })
    .refine((url) => /^postgres(ql)?:\/\/[^/?#]/i.test(url), "must be postgres://user:password@host:port/database (or postgresql://)")
    .optional(),
  LINKGATE_DATA_DIR: z.string().default("./.data"),
  // anything else would run as development (codes in the log, a generated master key): a
  // staging server set to "prod" or "staging" must say what it means
  NODE_ENV: z.enum(["development", "production", "test"], { error: "must be production, development or test (only production runs with production's safeguards)" }).default("development"),
  LINKGATE_SECRET_KEY: z
    .string()
    .refine((key) => Buffer.from(key, "base64").length >= 32, "must be at least 32 bytes, base64-encoded (openssl rand -base64 32)")
    .optional(),
  LINKGATE_BOOTSTRAP_API_KEY: z.string().min(16, { error: "must be at least 16 characters" }).optional(),
  LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY: z.string().min(16, { error: "must be at least 16 characters" }).optional(),
  LINKGATE_TRUSTED_PROXIES: proxies.optional(),
  LINKGATE_CORS_ORIGINS: origins.optional(),
  // Abuse limits (docs/security.md); windows are fixed, counts per window.
  LINKGATE_LIMIT_SENDS_PER_IDENTIFIER_ADDRESS: whole(1).default(5),
  LINKGATE_LIMIT_SENDS_PER_ADDRESS_HOURLY: whole(1).default(30),
  LINKGATE_LIMIT_SENDS_PER_IDENTIFIER_HOURLY: whole(1).default(200), // src/limits.ts says why 200
  LINKGATE_LIMIT_SMS_PER_PROJECT_HOURLY: whole(1).default(500),
  LINKGATE_LIMIT_EMAILS_PER_PROJECT_HOURLY: whole(1).default(5000),
  LINKGATE_LIMIT_WRONG_CODES_PER_IDENTIFIER_ADDRESS: whole(1).default(15),
  LINKGATE_LIMIT_WRONG_CODES_PER_IDENTIFIER_HOURLY: whole(1).default(100),
  LINKGATE_LIMIT_NOTICES_PER_DESTINATION: whole(1).default(5),
  LINKGATE_LIMIT_NOTICES_PER_ACCOUNT_HOURLY: whole(1).default(20),
  // GraphQL operation limits, checked before execution.
  LINKGATE_GRAPHQL_MAX_DEPTH: whole(1).default(12),
  LINKGATE_GRAPHQL_MAX_ALIASES: whole(1).default(30),
  LINKGATE_GRAPHQL_MAX_TOKENS: whole(1).default(2000),
  LINKGATE_GRAPHQL_MAX_DIRECTIVES: whole(1).default(20),
  LINKGATE_GRAPHQL_MAX_COST: whole(1).default(5000),
  LINKGATE_GRAPHIQL: z.enum(["0", "1"], { error: "must be 0 or 1" }).optional(),
  LINKGATE_WEBAUTHN_RP_ID: rpId.optional(),
  LINKGATE_WEBAUTHN_ORIGINS: passkeyOrigins.optional(),
  LINKGATE_PAGES_PUBLISHABLE_KEY: z.string().optional(),
  LINKGATE_METRICS_TOKEN: z.string().trim().min(16, { error: "must be at least 16 characters" }).optional(),
  LINKGATE_RETENTION_EVENTS_DAYS: whole(1, 3650).default(30),
  LINKGATE_RETENTION_DELIVERY_LOG_DAYS: whole(1, 3650).default(30),
  LINKGATE_RETENTION_SWEEP_SECONDS: whole(0, 86400).default(60),
  LINKGATE_RECENT_AUTH_SECONDS: whole(1).default(600),
  // bounded: past Node's timer limit (about 24.8 days) a timeout fires at once (31st review)
  LINKGATE_SHUTDOWN_TIMEOUT_MS: whole(1, 3_600_000).default(30000),
  LINKGATE_ADMIN_TOKEN: z.string().trim().min(16, { error: "must be at least 16 characters" }).optional(),
  // every endpoint is the issuer followed by its path, and the issuer is every token's `iss`:
  // with a trailing slash, a query or a fragment, discovery named endpoints that answered 404
  LINKGATE_ISSUER: z.string().url({ error: "must be a URL" }).refine(isIssuer, "must be http(s)://host[:port][/path] with no trailing slash, query or fragment").optional(),
  // nodemailer takes smtp: and smtps: URLs only: any other string it took for a transport object,
  // and the start died with a stack trace that spelled out the URL, password included
  SMTP_URL: z
    .string()
    .url({ error: "must be a URL" })
    .refine((url) => /^smtps?:\/\/[^/?#]/i.test(url), "must be smtp://user:password@host:port (or smtps://)")
    .superRefine(smtpQueryFaults)
    .optional(),
  // one sender with an address: a mail server refuses a MAIL FROM without one, and every e-mailed
  // code then failed (33rd review)
  SMTP_FROM: z.string().refine(isOneSender, "must be one sender with an address, like Example <no-reply@example.com>").default("linkgate <no-reply@localhost>"),
  // texts are POSTed with fetch, which sends http(s) only: any other scheme failed every text
  SMS_WEBHOOK_URL: z
    .string()
    .url({ error: "must be a URL" })
    .refine((url) => /^https?:\/\/[^/?#]/i.test(url), "must be an http:// or https:// URL")
    .optional(),
  LINKGATE_SMS_COUNTRIES: countries.optional(),
  LINKGATE_WEBHOOK_ALLOW_PRIVATE: z.enum(["0", "1", ""], { error: "must be 0 or 1" }).optional(),
  LINKGATE_WEBHOOK_RETRY_SCHEDULE_MS: csvMs.default([10000, 30000, 60000, 300000, 1800000]),
  LINKGATE_NOTICE_RETRY_SCHEDULE_MS: csvMs.default([30000, 120000, 600000, 3600000, 21600000]),
  // bounded: a lease is this plus 30 s, stored as milliseconds in a 32-bit integer (31st review)
  LINKGATE_WEBHOOK_TIMEOUT_MS: whole(1, 300_000).default(10000),
  LINKGATE_WEBHOOKS_PER_PROJECT: whole(1).default(DEFAULT_WEBHOOKS_PER_PROJECT),
  LINKGATE_IDENTITY_PROVIDERS_PER_PROJECT: whole(1).default(DEFAULT_IDENTITY_PROVIDERS_PER_PROJECT),
  LINKGATE_UPSTREAM_TIMEOUT_MS: whole(1, 60000).default(5000),
  LINKGATE_WEBHOOK_BREAKER_FAILURES: whole(1).default(5),
  LINKGATE_WEBHOOK_BREAKER_OPEN_MS: whole(1, 86_400_000).default(1000),
  LINKGATE_WEBHOOK_BREAKER_MAX_OPEN_MS: whole(1, 86_400_000).default(60000),
  LINKGATE_WORKER: z.enum(["0", "1"], { error: "must be 0 or 1" }).default("1"),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"], { error: "must be one of fatal, error, warn, info, debug, trace, silent" }).default("info"),
});

/** Every environment variable linkgate reads (docs/configuration.md lists each). */
export const SETTING_NAMES: readonly string[] = Object.keys(envSchema.shape);

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
  /** The countries whose phones are texted codes (ISO 3166, upper case); empty: every country (docs/security.md, "Texts") */
  smsCountries: string[];
  webhookAllowPrivate: boolean;
  retryScheduleMs: number[];
  webhookTimeoutMs: number;
  /** webhooks one project may hold (src/webhooks/service.ts createWebhook says why) */
  webhooksPerProject: number;
  /** identity providers one project may hold (src/auth/external/providers.ts createProvider says why) */
  identityProvidersPerProject: number;
  /** how long one request to an external identity provider may take (docs/external-identities.md) */
  upstreamTimeoutMs: number;
  /** per-endpoint circuit breaker of the delivery worker (src/delivery/breaker.ts) */
  webhookBreaker: { failures: number; openMs: number; maxOpenMs: number };
  /** delays before security notices are retried */
  noticeRetryScheduleMs: number[];
  worker: boolean;
  logLevel: string;
  /** what the start should warn about: LINKGATE_ variables it does not know (a misspelt limit would keep its default unnoticed) */
  warnings?: string[];
};

export type AbuseLimits = {
  sendsPerIdentifierAddress: number;
  sendsPerAddressHourly: number;
  /** code sends to one identifier from all the places it is not known at, together */
  sendsPerIdentifierHourly: number;
  smsPerProjectHourly: number;
  emailsPerProjectHourly: number;
  wrongCodesPerIdentifierAddress: number;
  wrongCodesPerIdentifierHourly: number;
  /** security notices per destination and 10 minutes */
  noticesPerDestination: number;
  noticesPerAccountHourly: number;
};

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = envSchema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== "")));
  if (!parsed.success) {
    // one line, as every fault at start (docs/configuration.md)
    const faults = parsed.error.issues.map((i) => `${i.path.join(".")} ${i.message}`);
    throw new ConfigError(`invalid configuration: ${faults.join("; ")}`);
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
      sendsPerIdentifierHourly: e.LINKGATE_LIMIT_SENDS_PER_IDENTIFIER_HOURLY,
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
    webauthnRpId: e.LINKGATE_WEBAUTHN_RP_ID?.trim(),
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
    smsCountries: list(e.LINKGATE_SMS_COUNTRIES).map((c) => c.toUpperCase()),
    webhookAllowPrivate: e.LINKGATE_WEBHOOK_ALLOW_PRIVATE === "1",
    retryScheduleMs: e.LINKGATE_WEBHOOK_RETRY_SCHEDULE_MS,
    webhookTimeoutMs: e.LINKGATE_WEBHOOK_TIMEOUT_MS,
    webhooksPerProject: e.LINKGATE_WEBHOOKS_PER_PROJECT,
    identityProvidersPerProject: e.LINKGATE_IDENTITY_PROVIDERS_PER_PROJECT,
    upstreamTimeoutMs: e.LINKGATE_UPSTREAM_TIMEOUT_MS,
    webhookBreaker: {
      failures: e.LINKGATE_WEBHOOK_BREAKER_FAILURES,
      openMs: e.LINKGATE_WEBHOOK_BREAKER_OPEN_MS,
      maxOpenMs: Math.max(e.LINKGATE_WEBHOOK_BREAKER_OPEN_MS, e.LINKGATE_WEBHOOK_BREAKER_MAX_OPEN_MS),
    },
    noticeRetryScheduleMs: e.LINKGATE_NOTICE_RETRY_SCHEDULE_MS,
    worker: e.LINKGATE_WORKER === "1",
    logLevel: e.LOG_LEVEL,
    warnings: [...unknownSettings(env), ...retentionTooShortForDisabling(e)],
  };
  assertKeysOfTheirKind(e);
  assertProductionReady(config);
  // Set on purpose for the pages, yet unusable there: production refuses rather than serve
  // pages that only say they are not configured (a secret key is never put in a page).
  if (config.production && e.LINKGATE_PAGES_PUBLISHABLE_KEY && !isPublishableKey(e.LINKGATE_PAGES_PUBLISHABLE_KEY)) {
    throw new ConfigError("LINKGATE_PAGES_PUBLISHABLE_KEY must be a publishable key (lg_pk_…): it is written into the hosted pages, where anyone can read it");
  }
  return config;
}

/** A bootstrap key with the other kind's prefix is a mix-up, and a secret key would end up where anyone may read it. */
function assertKeysOfTheirKind(e: z.infer<typeof envSchema>): void {
  if (e.LINKGATE_BOOTSTRAP_API_KEY?.trim().startsWith("lg_pk_")) {
    throw new ConfigError("LINKGATE_BOOTSTRAP_API_KEY is a publishable key (lg_pk_…), not a secret key (lg_sk_…): set it as LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY");
  }
  if (e.LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY?.trim().startsWith("lg_sk_")) {
    throw new ConfigError("LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY is a secret key (lg_sk_…), and a publishable key is written into pages anyone can read: set it as LINKGATE_BOOTSTRAP_API_KEY");
  }
}

/**
 * A webhook is disabled once every attempt has failed for 24 hours, which the worker reads from
 * the delivery attempts (src/delivery/dead-webhooks.ts). Kept one day, the attempt that proves
 * the 24 hours is swept within a minute of becoming old enough, so a dead webhook was seldom
 * disabled (33rd review). Said at start rather than refused: a start that works today keeps
 * working.
 */
function retentionTooShortForDisabling(e: z.infer<typeof envSchema>): string[] {
  return (["LINKGATE_RETENTION_DELIVERY_LOG_DAYS", "LINKGATE_RETENTION_EVENTS_DAYS"] as const)
    .filter((name) => e[name] < 2)
    .map((name) => `${name}=1 keeps delivery attempts no longer than the 24 hours of failures that disable a webhook, so a webhook failing every delivery is seldom disabled: set 2 or more`);
}

/** One address with a local part and a domain, with or without a display name (nodemailer's own parser reads it). */
function isOneSender(value: string): boolean {
  const parsed = addressparser(value, { flatten: true });
  return parsed.length === 1 && /^[^@\s]+@[^@\s]+$/.test(parsed[0]!.address);
}

/** LINKGATE_ variables of `env` that no setting has, each with the nearest known name when one is close. */
function unknownSettings(env: NodeJS.ProcessEnv): string[] {
  const known = SETTING_NAMES.filter((k) => k.startsWith("LINKGATE_"));
  // LINKGATE_TEST_*: the test suite's own settings, passed down to the servers it starts
  const unknown = Object.keys(env).filter((k) => k.startsWith("LINKGATE_") && !k.startsWith("LINKGATE_TEST_") && !known.includes(k));
  return unknown.map((name) => {
    const near = known.map((k) => ({ k, d: editDistance(name, k) })).sort((a, b) => a.d - b.d)[0];
    const hint = near && near.d <= 4 ? ` (did you mean ${near.k}?)` : "";
    return `${name} is not a linkgate setting and is ignored${hint}`;
  });
}

/** Levenshtein distance, for the hint above. */
function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
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
  // it turns off the guard against webhooks and identity providers on private addresses (cloud
  // metadata, the operator's own network) for every holder of a secret key: a development .env
  // carried into production did so silently
  if (config.webhookAllowPrivate) throw new ConfigError("LINKGATE_WEBHOOK_ALLOW_PRIVATE=1 is for local development and tests only: unset it with NODE_ENV=production");
}

/** An issuer every endpoint can follow with its path: http(s), a host, an optional path, nothing after. */
function isIssuer(url: string): boolean {
  // zod runs this refinement on a value its URL check refused too (http://, http://a b), and a
  // throw here was a stack trace instead of the start's one line
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return false;
  }
  return (u.protocol === "https:" || u.protocol === "http:") && !url.endsWith("/") && !url.includes("?") && !url.includes("#");
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

/**
 * The issuer's path ("/auth" for https://example.com/auth, "" at the root): what a reverse proxy
 * strips before a request reaches the gateway, whose routes are at the root, and so what every
 * path sent back to a browser must start with (docs/operations.md, "Behind a reverse proxy").
 */
export function publicPath(issuer: string): string {
  return new URL(issuer).pathname.replace(/\/+$/, "");
}
