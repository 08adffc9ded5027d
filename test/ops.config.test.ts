// What the environment may say (docs/configuration.md): a value that cannot work stops the
// start with one plain line naming it, and a name linkgate does not know is warned about.
// Eighteenth review (a new user's walk through the docs): an unparseable trusted proxy was a
// stack trace, NODE_ENV=prod ran as development (codes in the log, a generated master key), a
// CORS entry that can never match and a misspelt limit passed without a word, bootstrap keys of
// the wrong kind were taken, and a fault took two lines of validator wording.
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../src/config.ts";

const refusal = (env: Record<string, string>): string => {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`${JSON.stringify(env)} was accepted`);
};

describe("configuration from the environment", () => {
  // 31st review: taken, each broke the worker or the shutdown (a 32-bit column, Node's timer limit)
  it("refuses milliseconds the worker cannot use, in one line naming them", () => {
    for (const [name, value, said] of [
      ["LINKGATE_WEBHOOK_RETRY_SCHEDULE_MS", "10000,2592000000", "must give no delay over 604800000 (7 days)"],
      ["LINKGATE_NOTICE_RETRY_SCHEDULE_MS", "99999999999999999999999", "must give no delay over 604800000 (7 days)"],
      ["LINKGATE_WEBHOOK_TIMEOUT_MS", "3000000000", "must be a whole number from 1 to 300000"],
      ["LINKGATE_SHUTDOWN_TIMEOUT_MS", "3000000000", "must be a whole number from 1 to 3600000"],
      ["LINKGATE_WEBHOOK_BREAKER_MAX_OPEN_MS", "86400001", "must be a whole number from 1 to 86400000"],
    ] as const) {
      expect(refusal({ [name]: value })).toBe(`invalid configuration: ${name} ${said}`);
    }
    expect(loadConfig({ LINKGATE_WEBHOOK_RETRY_SCHEDULE_MS: "1000,604800000", LINKGATE_WEBHOOK_TIMEOUT_MS: "300000" }).webhookTimeoutMs).toBe(300_000);
  });

  it("refuses a trusted proxy that is not an address or range, in one line naming it", () => {
    for (const value of ["notacidr", "10.0.0.0/33", "10.0.0.1, example.com"]) {
      const message = refusal({ LINKGATE_TRUSTED_PROXIES: value });
      expect(message).toMatch(/^invalid configuration: LINKGATE_TRUSTED_PROXIES must be a comma-separated list of IP addresses or CIDR ranges/);
      expect(message).not.toContain("\n");
    }
    expect(loadConfig({ LINKGATE_TRUSTED_PROXIES: "10.0.0.0/8, fd00::/8, 192.0.2.7, loopback" }).trustedProxies).toEqual(["10.0.0.0/8", "fd00::/8", "192.0.2.7", "loopback"]);
  });

  // 32nd review: each was taken, and broke something quietly
  it("refuses an issuer with a trailing slash, a query or a fragment: discovery named endpoints that answered 404", () => {
    for (const value of ["https://auth.example.com/", "https://auth.example.com/base/", "https://auth.example.com/base?x=1", "https://auth.example.com#frag", "ftp://auth.example.com"]) {
      expect(refusal({ LINKGATE_ISSUER: value })).toBe("invalid configuration: LINKGATE_ISSUER must be http(s)://host[:port][/path] with no trailing slash, query or fragment");
    }
    expect(loadConfig({ LINKGATE_ISSUER: "https://example.com/auth" }).issuer).toBe("https://example.com/auth");
    expect(loadConfig({ LINKGATE_ISSUER: "http://localhost:4000" }).issuer).toBe("http://localhost:4000");
  });

  it("refuses a database URL that is not postgres://host…, without repeating it: one missing its // carried the password in its path", () => {
    for (const value of ["postgres:/u:S3cretPW@127.0.0.1:5999/db", "postgres:S3cretPW@x", "mysql://u:S3cretPW@127.0.0.1/db"]) {
      const message = refusal({ DATABASE_URL: value });
      expect(message).toBe("invalid configuration: DATABASE_URL must be postgres://user:password@host:port/database (or postgresql://)");
    }
    expect(loadConfig({ DATABASE_URL: "postgresql://u:pw@db.internal/linkgate" }).databaseUrl).toBe("postgresql://u:pw@db.internal/linkgate");
  });

  // 34th review: SMTP_URL=http://… passed, and the start died in nodemailer with a stack trace
  // that spelled out the URL and its password; SMS_WEBHOOK_URL=ftp://… passed and failed every text
  it("refuses an SMTP URL that is not smtp:// or smtps://, and an SMS webhook that is not http(s)://, without repeating them", () => {
    for (const value of ["http://u:S3cretPW@mail.internal", "https://u:S3cretPW@mail.internal:587", "smtp:/u:S3cretPW@mail.internal", "mailto:S3cretPW@x"]) {
      expect(refusal({ SMTP_URL: value })).toBe("invalid configuration: SMTP_URL must be smtp://user:password@host:port (or smtps://)");
    }
    for (const value of ["ftp://u:S3cretPW@sms.internal/send", "file:///etc/S3cretPW", "smtp://u:S3cretPW@sms.internal"]) {
      expect(refusal({ SMS_WEBHOOK_URL: value })).toBe("invalid configuration: SMS_WEBHOOK_URL must be an http:// or https:// URL");
    }
    expect(loadConfig({ SMTP_URL: "smtps://u:pw@mail.internal:465", SMS_WEBHOOK_URL: "https://u:pw@sms.internal/send" })).toMatchObject({
      smtpUrl: "smtps://u:pw@mail.internal:465",
      smsWebhookUrl: "https://u:pw@sms.internal/send",
    });
    expect(loadConfig({ SMTP_URL: "smtp://mail.internal:587?connectionTimeout=5000" }).smtpUrl).toBe("smtp://mail.internal:587?connectionTimeout=5000");
  });

  // ops review: nodemailer gave connectionTimeout=-5 (or =abc) to Node's resolver, which threw out
  // of the start's SMTP check and killed the listening gateway with a stack trace; sendTimeout=1e99
  // timed every send out at once
  it("refuses SMTP query timeouts that are not whole milliseconds, without repeating the URL", () => {
    for (const query of ["connectionTimeout=-5", "connectionTimeout=abc", "greetingTimeout=0", "socketTimeout=1.5", "sendTimeout=1e99", "sendTimeout=2147483648"]) {
      const name = query.split("=")[0];
      const message = refusal({ SMTP_URL: `smtp://u:S3cretPW@mail.internal:587?${query}` });
      expect(message).toBe(`invalid configuration: SMTP_URL must have ${name} in its query as a whole number of milliseconds from 1 to 2147483647`);
    }
    expect(refusal({ SMTP_URL: "smtp://u:S3cretPW@mail.internal:587?maxConnections=0" })).toBe("invalid configuration: SMTP_URL must have maxConnections in its query as a whole number of at least 1");
    const url = "smtp://u:pw@mail.internal:587?connectionTimeout=5000&greetingTimeout=5000&socketTimeout=9000&sendTimeout=30000&maxConnections=2";
    expect(loadConfig({ SMTP_URL: url }).smtpUrl).toBe(url);
  });

  // ops review: zod runs the issuer's refinement on a value its URL check refused, and that threw
  it("refuses an issuer that is no URL in one line, without a stack trace", () => {
    for (const value of ["http://", "http://a b", "http://[::1"]) {
      expect(refusal({ LINKGATE_ISSUER: value })).toBe("invalid configuration: LINKGATE_ISSUER must be a URL; LINKGATE_ISSUER must be http(s)://host[:port][/path] with no trailing slash, query or fragment");
    }
  });

  it("refuses LINKGATE_WEBHOOK_ALLOW_PRIVATE=1 in production: it turns off the guard against private targets for every secret key", () => {
    const production = { NODE_ENV: "production", LINKGATE_SECRET_KEY: Buffer.alloc(32, 7).toString("base64"), SMTP_URL: "smtp://127.0.0.1:2525", SMS_WEBHOOK_URL: "https://sms.example/send" };
    expect(refusal({ ...production, LINKGATE_WEBHOOK_ALLOW_PRIVATE: "1" })).toBe(
      "LINKGATE_WEBHOOK_ALLOW_PRIVATE=1 is for local development and tests only: unset it with NODE_ENV=production",
    );
    expect(loadConfig({ ...production, LINKGATE_WEBHOOK_ALLOW_PRIVATE: "0" }).webhookAllowPrivate).toBe(false);
    expect(loadConfig({ LINKGATE_WEBHOOK_ALLOW_PRIVATE: "1" }).webhookAllowPrivate).toBe(true);
  });

  it("refuses a NODE_ENV other than production, development or test", () => {
    for (const value of ["prod", "staging", "Production"]) {
      expect(refusal({ NODE_ENV: value })).toBe("invalid configuration: NODE_ENV must be production, development or test (only production runs with production's safeguards)");
    }
    expect(loadConfig({ NODE_ENV: "test" }).production).toBe(false);
  });

  it("refuses CORS entries that are not origins, since they can never match one, and takes apps' own schemes", () => {
    const faults: Array<[string, string]> = [
      ["foo", "is not one"],
      ["https://app.example.com/", "is not one (did you mean https://app.example.com?)"],
      ["https://App.Example.com:443", "is not one (did you mean https://app.example.com?)"],
      ["https://app.example.com/path", "is not one (did you mean https://app.example.com?)"],
      ["capacitor://localhost/", "is not one (a lower-case scheme, a host, no path or trailing slash)"],
      ["CAPACITOR://localhost", "is not one (a lower-case scheme, a host, no path or trailing slash)"],
      ["foo://user:pass@host", "is not one (a lower-case scheme, a host, no path or trailing slash)"],
      ["*", "has a wildcard, which never matches: list each origin"],
      ["https://*.example.com", "has a wildcard, which never matches: list each origin"],
    ];
    for (const [value, fault] of faults) {
      expect(refusal({ LINKGATE_CORS_ORIGINS: value })).toBe(`invalid configuration: LINKGATE_CORS_ORIGINS must list origins as browsers send them, like https://app.example.com: ${JSON.stringify(value)} ${fault}`);
    }
    // Capacitor and Ionic apps, browser extensions and Tauri send their own schemes (twentieth review)
    const apps = "https://app.example.com, http://localhost:5173, capacitor://localhost, chrome-extension://abcdefghijklmnopabcdefghijklmnop, tauri://localhost";
    expect(loadConfig({ LINKGATE_CORS_ORIGINS: apps }).corsOrigins).toEqual(apps.split(", "));
  });

  it("says what a number must be in plain words, every fault on one line", () => {
    expect(refusal({ LINKGATE_LIMIT_SENDS_PER_IDENTIFIER_ADDRESS: "abc", PORT: "70000" })).toBe(
      "invalid configuration: PORT must be a whole number from 0 to 65535; LINKGATE_LIMIT_SENDS_PER_IDENTIFIER_ADDRESS must be a whole number of at least 1",
    );
    expect(refusal({ LINKGATE_RETENTION_EVENTS_DAYS: "1.5" })).toBe("invalid configuration: LINKGATE_RETENTION_EVENTS_DAYS must be a whole number from 1 to 3650");
  });

  // 33rd session: PORT=0x50 listened on port 80 (Number() reads hexadecimal, binary and exponents)
  it("takes numbers in decimal digits only", () => {
    for (const value of ["0x50", "0b1010000", "8e1", "80.0", "1e3"]) {
      expect(refusal({ PORT: value })).toBe("invalid configuration: PORT must be a whole number from 0 to 65535");
    }
    expect(refusal({ LINKGATE_LIMIT_SMS_PER_PROJECT_HOURLY: "99999999999999999999" })).toBe("invalid configuration: LINKGATE_LIMIT_SMS_PER_PROJECT_HOURLY must be a whole number of at least 1");
    expect(loadConfig({ PORT: " 8080 " }).port).toBe(8080);
    expect(loadConfig({}).port).toBe(4000);
  });

  // 33rd session: these were warned about only once the hosted pages started, and passkeys failed
  // in the API too
  it("refuses a passkey relying party id that is not a host name, and passkey origins that are not origins", () => {
    expect(refusal({ LINKGATE_WEBAUTHN_RP_ID: "https://auth.example.com" })).toBe(
      'invalid configuration: LINKGATE_WEBAUTHN_RP_ID must be a host name in lower case with no scheme, port or path, like auth.example.com: "https://auth.example.com" is not one',
    );
    for (const value of ["example.com:443", "Example.com", "example.com/", ".example.com"]) {
      expect(refusal({ LINKGATE_WEBAUTHN_RP_ID: value })).toMatch(/^invalid configuration: LINKGATE_WEBAUTHN_RP_ID must be a host name in lower case/);
    }
    expect(refusal({ LINKGATE_WEBAUTHN_ORIGINS: "https://example.com/login" })).toBe(
      'invalid configuration: LINKGATE_WEBAUTHN_ORIGINS must list origins as browsers send them, like https://example.com: "https://example.com/login" is not one (did you mean https://example.com?)',
    );
    const android = "android:apk-key-hash:2mp1VFgXzT3x1Vdwu4Fv0E6d9n1qjIFf3yXf4qXxqG8";
    const config = loadConfig({ LINKGATE_WEBAUTHN_RP_ID: "example.com", LINKGATE_WEBAUTHN_ORIGINS: `https://auth.example.com, ${android}` });
    expect(config.webauthnRpId).toBe("example.com");
    expect(config.webauthnOrigins).toEqual(["https://auth.example.com", android]);
  });

  it("warns about a LINKGATE_ variable it does not know, with the setting it is closest to", () => {
    const config = loadConfig({ LINKGATE_LIMIT_SEND_PER_ADDRESS_HOURLY: "3", LINKGATE_NOT_A_THING_AT_ALL: "1", LINKGATE_TEST_PG_TEMPLATE: "x" });
    expect(config.abuse.sendsPerAddressHourly).toBe(30);
    expect(config.warnings).toEqual([
      "LINKGATE_LIMIT_SEND_PER_ADDRESS_HOURLY is not a linkgate setting and is ignored (did you mean LINKGATE_LIMIT_SENDS_PER_ADDRESS_HOURLY?)",
      "LINKGATE_NOT_A_THING_AT_ALL is not a linkgate setting and is ignored",
    ]);
  });

  // 33rd review: the attempt that proves 24 hours of failures was swept within a minute of
  // becoming old enough, so a dead webhook was seldom disabled
  it("warns that one day of retention leaves too little of the delivery log to disable a dead webhook", () => {
    expect(loadConfig({ LINKGATE_RETENTION_DELIVERY_LOG_DAYS: "1" }).warnings).toEqual([
      "LINKGATE_RETENTION_DELIVERY_LOG_DAYS=1 keeps delivery attempts no longer than the 24 hours of failures that disable a webhook, so a webhook failing every delivery is seldom disabled: set 2 or more",
    ]);
    expect(loadConfig({ LINKGATE_RETENTION_EVENTS_DAYS: "1" }).warnings?.[0]).toMatch(/^LINKGATE_RETENTION_EVENTS_DAYS=1 keeps delivery attempts/);
    expect(loadConfig({ LINKGATE_RETENTION_DELIVERY_LOG_DAYS: "2", LINKGATE_RETENTION_EVENTS_DAYS: "2" }).warnings).toEqual([]);
  });

  // 33rd review: a request's header is trimmed, so a token set with spaces around it never matched
  it("takes the admin and metrics tokens without the spaces around them", () => {
    const config = loadConfig({ LINKGATE_ADMIN_TOKEN: " admin-token-0123456789 ", LINKGATE_METRICS_TOKEN: "\tmetrics-token-0123456789\n" });
    expect(config.adminToken).toBe("admin-token-0123456789");
    expect(config.metricsToken).toBe("metrics-token-0123456789");
    expect(refusal({ LINKGATE_ADMIN_TOKEN: "   short   token   " })).toBe("invalid configuration: LINKGATE_ADMIN_TOKEN must be at least 16 characters");
  });

  // 33rd review: a mail server refuses a MAIL FROM without an address, and every e-mailed code failed
  it("refuses an SMTP_FROM that is not one sender with an address", () => {
    for (const value of ["bad", "Example <bad>", "a@example.com, b@example.com", "Example <>"]) {
      expect(refusal({ SMTP_FROM: value })).toBe("invalid configuration: SMTP_FROM must be one sender with an address, like Example <no-reply@example.com>");
    }
    expect(loadConfig({ SMTP_FROM: "Example <no-reply@example.com>" }).smtpFrom).toBe("Example <no-reply@example.com>");
    expect(loadConfig({ SMTP_FROM: "no-reply@example.com" }).smtpFrom).toBe("no-reply@example.com");
    expect(loadConfig({}).smtpFrom).toBe("linkgate <no-reply@localhost>");
  });

  it("refuses a bootstrap key of the other kind, naming the variable that was set", () => {
    const key = (kind: "pk" | "sk") => `lg_${kind}_${"A".repeat(43)}`;
    expect(refusal({ LINKGATE_BOOTSTRAP_API_KEY: key("pk") })).toMatch(/^LINKGATE_BOOTSTRAP_API_KEY is a publishable key/);
    expect(refusal({ LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY: key("sk") })).toMatch(/^LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY is a secret key/);
    expect(loadConfig({ LINKGATE_BOOTSTRAP_API_KEY: key("sk"), LINKGATE_BOOTSTRAP_PUBLISHABLE_KEY: key("pk") }).bootstrapApiKey).toBe(key("sk"));
  });
});
