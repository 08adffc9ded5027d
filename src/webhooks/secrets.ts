import { randomBytes } from "node:crypto";

const PREFIX = "whsec_";

/** A fresh webhook secret: `whsec_` + base64 of 32 random bytes (docs/webhooks.md, "Managing endpoints"). */
export function generateWebhookSecret(): string {
  return PREFIX + randomBytes(32).toString("base64");
}

/**
 * The Standard Webhooks HMAC key: the base64-decoded part after `whsec_`.
 * A missing prefix is tolerated, as the reference `standardwebhooks` library does, so both
 * sides derive the same key from the same string.
 */
export function standardKey(secret: string): Buffer {
  const encoded = secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret;
  const key = Buffer.from(encoded, "base64");
  // An empty key would make every HMAC forgeable by anyone who knows the scheme.
  if (key.length === 0) throw new TypeError("webhook secret has an empty key");
  return key;
}
