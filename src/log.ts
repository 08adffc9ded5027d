// Structured logs. Secrets never reach a log line: the redaction list covers every header
// and field that carries a credential, in case one is ever logged by mistake.
import pino, { type Logger } from "pino";

export function createLogger(level = "info"): Logger {
  return pino({
    level,
    redact: {
      paths: [
        "req.headers.authorization",
        "req.headers['x-api-key']",
        "req.headers['x-admin-token']",
        "*.secret",
        "*.otp",
        "*.access_token",
        "*.id_token",
        "*.apiKey",
      ],
      censor: "[redacted]",
    },
  });
}

export type { Logger };
