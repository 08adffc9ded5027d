// Small, audited building blocks over node:crypto. Everything secret at rest goes through
// seal/unseal (AES-256-GCM under the master key); everything compared goes through
// safeEqual.
import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes, timingSafeEqual } from "node:crypto";

export type MasterKey = { raw: Buffer };

export function parseMasterKey(b64: string): MasterKey {
  const raw = Buffer.from(b64, "base64");
  if (raw.length < 32) throw new Error("LINKGATE_SECRET_KEY must be at least 32 bytes, base64-encoded");
  return { raw };
}

/** A purpose-bound 32-byte key, so one leaked derived key never exposes another. */
export function deriveKey(master: MasterKey, purpose: string): Buffer {
  return Buffer.from(hkdfSync("sha256", master.raw, Buffer.alloc(0), `linkgate:${purpose}`, 32));
}

const SEAL_VERSION = "v1";

export function seal(master: MasterKey, plaintext: string): string {
  const key = deriveKey(master, "seal");
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  const data = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  return [SEAL_VERSION, iv.toString("base64url"), cipher.getAuthTag().toString("base64url"), data.toString("base64url")].join(".");
}

export function unseal(master: MasterKey, sealed: string): string {
  const [version, iv, tag, data] = sealed.split(".");
  if (version !== SEAL_VERSION || !iv || !tag || data === undefined) throw new Error("unrecognised sealed value");
  const decipher = createDecipheriv("aes-256-gcm", deriveKey(master, "seal"), Buffer.from(iv, "base64url"));
  decipher.setAuthTag(Buffer.from(tag, "base64url"));
  return Buffer.concat([decipher.update(Buffer.from(data, "base64url")), decipher.final()]).toString("utf8");
}

export function sha256Hex(input: string): string {
  return createHash("sha256").update(input).digest("hex");
}

export function hmacHex(key: Buffer, input: string): string {
  return createHmac("sha256", key).update(input).digest("hex");
}

/**
 * Compares in time that depends on neither value: both are hashed first, so not even the length
 * of a configured token (the admin and metrics tokens) shows in the time a wrong guess takes.
 */
export function safeEqual(a: string, b: string): boolean {
  const x = createHash("sha256").update(a).digest();
  const y = createHash("sha256").update(b).digest();
  return timingSafeEqual(x, y) && a === b;
}

export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString("base64url");
}
