import { createHmac } from "node:crypto";
import { standardKey } from "./secrets.ts";

export type RawBody = string | Buffer | Uint8Array;

export interface LiveSecrets {
  current: string;
  /** Present only while a rotation's transition is running. */
  previous?: string | null;
}

export interface SignatureInput {
  /** The exact bytes that will be sent; signing a re-serialized copy would break verification. */
  body: RawBody;
  eventId: string;
  eventType: string;
  attempt: number;
  /** Unix seconds. */
  timestamp: number;
  secrets: LiveSecrets;
}

function bytes(body: RawBody): Buffer {
  if (typeof body === "string") return Buffer.from(body, "utf8");
  return Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

/** `X-Service-Signature` value: keyed with the UTF-8 bytes of the whole secret string, `whsec_` included. */
export function legacySignature(body: RawBody, secret: string): string {
  return "sha256=" + createHmac("sha256", Buffer.from(secret, "utf8")).update(bytes(body)).digest("hex");
}

/** One Standard Webhooks `webhook-signature` entry (`v1,<base64>`). */
export function standardSignature(id: string, timestamp: number | string, body: RawBody, secret: string): string {
  const mac = createHmac("sha256", standardKey(secret))
    .update(`${id}.${timestamp}.`, "utf8")
    .update(bytes(body))
    .digest("base64");
  return "v1," + mac;
}

/** Every signature header of one delivery attempt (docs/webhooks.md, "Signatures"). */
export function signatureHeaders(input: SignatureInput): Record<string, string> {
  const { body, eventId, eventType, attempt, timestamp, secrets } = input;
  // Milliseconds here would make every receiver reject the delivery as out of tolerance.
  if (!Number.isSafeInteger(timestamp) || timestamp < 0 || timestamp > 1e11) {
    throw new RangeError(`timestamp must be unix seconds, got ${timestamp}`);
  }
  if (!Number.isSafeInteger(attempt) || attempt < 1) throw new RangeError(`attempt must be >= 1, got ${attempt}`);
  const previous = secrets.previous || null;

  const headers: Record<string, string> = {
    "Content-Type": "application/json",
    "X-Service-Signature": legacySignature(body, secrets.current),
  };
  if (previous) headers["X-Service-Signature-Previous"] = legacySignature(body, previous);
  headers["X-Service-Event-Id"] = eventId;
  headers["X-Service-Event-Type"] = eventType;
  headers["X-Service-Delivery-Attempt"] = String(attempt);
  headers["webhook-id"] = eventId;
  headers["webhook-timestamp"] = String(timestamp);
  const entries = [standardSignature(eventId, timestamp, body, secrets.current)];
  if (previous) entries.push(standardSignature(eventId, timestamp, body, previous));
  headers["webhook-signature"] = entries.join(" ");
  return headers;
}

export interface RotatableWebhook {
  secret: string;
  previousSecret: string | null;
  previousSecretExpiresAt: Date | null;
}

/**
 * The secrets to sign with at `now`. The previous secret is live strictly before its expiry;
 * without a recorded expiry it is treated as expired so an old secret can never linger forever.
 */
export function liveSecrets(webhook: RotatableWebhook, now: Date): { current: string; previous: string | null } {
  const { secret, previousSecret, previousSecretExpiresAt: ends } = webhook;
  const live = previousSecret !== null && ends !== null && now.getTime() < ends.getTime();
  return { current: secret, previous: live ? previousSecret : null };
}
