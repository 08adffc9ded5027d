// @linkgate/receiver: verifies linkgate webhook deliveries. Integrators install this package on
// its own, so it imports nothing but node:crypto, and its public types mention no Node or DOM
// type: a TypeScript project compiles against it without @types/node or lib "dom".
import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * The request body exactly as received: a Node `Buffer` (a `Uint8Array`), the `ArrayBuffer` of
 * a Fetch `request.arrayBuffer()`, or a string.
 */
export type RawBody = string | Uint8Array | ArrayBuffer;

export type WebhookVerificationCode =
  | "missing_signature"
  | "invalid_signature"
  | "timestamp_out_of_tolerance"
  | "invalid_body";

// The ESM and CommonJS builds each define this class; an application that imports the package
// while one of its dependencies requires it holds both (docs/receiver.md, "Verify a delivery").
const BRAND = Symbol.for("@linkgate/receiver.WebhookVerificationError");

export class WebhookVerificationError extends Error {
  readonly code: WebhookVerificationCode;
  /** The HTTP status a receiver should answer with. */
  readonly status: 400 | 401;
  constructor(code: WebhookVerificationCode, message: string) {
    super(message);
    this.name = "WebhookVerificationError";
    this.code = code;
    this.status = code === "missing_signature" || code === "invalid_body" ? 400 : 401;
    Object.defineProperty(this, BRAND, { value: true });
  }

  /**
   * `instanceof WebhookVerificationError` holds for an error of either build. A subclass keeps the
   * ordinary check, so it does not claim every branded error.
   */
  static [Symbol.hasInstance](value: unknown): boolean {
    if (this !== WebhookVerificationError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
  }
}

export interface WebhookEnvelope {
  id: string;
  event_type: string;
  created_at: string;
  project_id: string;
  data: Record<string, unknown>;
  test?: true;
}

export interface VerifySuccess {
  ok: true;
  envelope: WebhookEnvelope;
  scheme: "legacy" | "standard";
  /** Which of the secrets given matched: 0 for the first (or the only one), 1 for the second, … */
  secretIndex: number;
  /**
   * @deprecated Use `secretIndex`. The matching secret itself; not enumerable, so
   * `JSON.stringify` and `util.inspect` of a result leave it out (and so does `{ ...result }`).
   */
  readonly secretUsed: string;
}

export interface VerifyFailure {
  ok: false;
  error: WebhookVerificationError;
}

export type VerifyResult = VerifySuccess | VerifyFailure;

export interface VerifyOptions {
  /** Allowed clock difference for `webhook-timestamp`, in seconds: a finite number ≥ 0. Default 300. */
  toleranceSeconds?: number;
  /** Current time in milliseconds; injectable for tests. */
  now?: () => number;
  /**
   * `standard` (default): Standard Webhooks only, whose signed timestamp refuses a replayed old
   * delivery; linkgate signs every delivery with it. `legacy` (X-Service-Signature) signs the
   * body alone, so a captured delivery verifies forever; `any` takes either, and so takes a
   * replay whose webhook-* headers were stripped. Both are opt-ins for receivers that cannot
   * read the webhook-* headers. Any other value throws a TypeError.
   */
  scheme?: "legacy" | "standard" | "any";
}

/** `req.headers` of node:http or Express, or anything with `get(name)` such as a Fetch `Headers`. */
export type HeaderSource =
  | { get(name: string): string | null | undefined }
  | Record<string, string | string[] | undefined>;

const PREFIX = "whsec_";
const SCHEMES = ["standard", "legacy", "any"] as const;
const MIN_KEY_BYTES = 16;

/** Names a bad option value without printing more than a short string of it. */
function shown(value: unknown): string {
  if (typeof value === "string") return value.length > 40 ? "a string" : JSON.stringify(value);
  if (value === null || ["number", "boolean", "bigint", "undefined"].includes(typeof value)) return String(value);
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

// Tags, not instanceof: a body made in another realm (a vm context, a test environment) is
// still a Uint8Array or an ArrayBuffer.
const tag = (value: unknown) => Object.prototype.toString.call(value);

function bytes(body: unknown): Buffer {
  if (typeof body === "string") return Buffer.from(body, "utf8");
  if (Buffer.isBuffer(body)) return body;
  if (ArrayBuffer.isView(body) && tag(body) === "[object Uint8Array]") return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (tag(body) === "[object ArrayBuffer]") return Buffer.from(body as ArrayBuffer);
  throw new TypeError(`verifyWebhook: pass the raw request body: string, Buffer, Uint8Array or ArrayBuffer (got ${shown(body)}); a parsed JSON body cannot be verified`);
}

/** One secret as given, checked once and keyed for both schemes. */
interface Secret {
  index: number;
  secret: string;
  /** `X-Service-Signature` key: the UTF-8 bytes of the whole secret string, `whsec_` included. */
  legacyKey: Buffer;
  /** Standard Webhooks key: the base64-decoded part after `whsec_`. */
  standardKey: Buffer;
}

/**
 * linkgate makes every secret as `whsec_` + base64 of 32 random bytes (docs/webhooks.md,
 * "Managing endpoints"). Node's base64 decoder skips characters outside the alphabet and stops at
 * `=`, so a mangled secret (a stray character, a trailing newline, cut short) would still decode
 * to some other key and verify nothing, or to a short one; refusing it says what is wrong.
 */
function parseSecret(secret: string, index: number, scheme: (typeof SCHEMES)[number]): Secret {
  const where = `verifyWebhook: secret ${index}`;
  const prefixed = secret.startsWith(PREFIX);
  // The legacy key is the whole string as issued, so a secret stripped of whsec_ never matches it.
  if (!prefixed && scheme !== "standard") throw new TypeError(`${where} does not start with whsec_, which the ${scheme} scheme signs with`);
  const encoded = prefixed ? secret.slice(PREFIX.length) : secret;
  const key = Buffer.from(encoded, "base64");
  // Re-encoding is exact only for canonical base64: the alphabet A-Z a-z 0-9 + /, its = padding,
  // and zero bits after the last byte.
  if (key.toString("base64") !== encoded) {
    throw new TypeError(`${where} is not ${prefixed ? "whsec_ followed by " : ""}standard base64 (A-Z a-z 0-9 + / and = padding, nothing else)`);
  }
  if (key.length < MIN_KEY_BYTES) throw new TypeError(`${where} decodes to ${key.length} bytes; a key needs at least ${MIN_KEY_BYTES} (linkgate's have 32)`);
  return { index, secret, legacyKey: Buffer.from(secret, "utf8"), standardKey: key };
}

/**
 * Empty and unset entries are skipped, so `WEBHOOK_SECRETS.split(",")` with a trailing comma or
 * `[process.env.NEW, process.env.OLD]` after OLD is unset keep working; every other entry must be a
 * well-formed secret, checked on every call whether or not another one matches, so a bad secret
 * held for a rotation fails now rather than on the day it is the only one that can match.
 */
function parseSecrets(secrets: unknown, scheme: (typeof SCHEMES)[number]): Secret[] {
  const list: unknown[] = Array.isArray(secrets) ? secrets : [secrets];
  const parsed: Secret[] = [];
  list.forEach((s, index) => {
    if (s === undefined || s === null || s === "") return;
    if (typeof s !== "string") throw new TypeError(`verifyWebhook: secret ${index} is ${shown(s)}, not a string`);
    parsed.push(parseSecret(s, index, scheme));
  });
  if (parsed.length === 0) throw new TypeError("verifyWebhook needs at least one secret");
  return parsed;
}

function parseOptions(options: unknown): { scheme: (typeof SCHEMES)[number]; toleranceSeconds: number; now: () => number } {
  if (options === undefined) options = {};
  if (typeof options !== "object" || options === null) throw new TypeError(`verifyWebhook: options must be an object, got ${shown(options)}`);
  const { scheme = "standard", toleranceSeconds = 300, now = Date.now } = options as Record<string, unknown>;
  // Anything but the three names used to fall through to `any`, which verifies a replay stripped
  // of its webhook-* headers by its legacy signature alone.
  if (!SCHEMES.includes(scheme as (typeof SCHEMES)[number])) {
    throw new TypeError(`verifyWebhook: options.scheme must be "standard", "legacy" or "any" (or left out for "standard"), got ${shown(scheme)}`);
  }
  // A NaN or infinite window compares false with every clock difference and so would accept any
  // timestamp; a negative one would refuse every delivery.
  if (typeof toleranceSeconds !== "number" || !Number.isFinite(toleranceSeconds) || toleranceSeconds < 0) {
    throw new TypeError(`verifyWebhook: options.toleranceSeconds must be a finite number of seconds, 0 or more, got ${shown(toleranceSeconds)}`);
  }
  if (typeof now !== "function") throw new TypeError(`verifyWebhook: options.now must be a function returning milliseconds, got ${shown(now)}`);
  return { scheme: scheme as (typeof SCHEMES)[number], toleranceSeconds, now: now as () => number };
}

/** `X-Service-Signature`: `sha256=` + hex HMAC of the body. */
function legacySignature(body: Buffer, key: Buffer): string {
  return "sha256=" + createHmac("sha256", key).update(body).digest("hex");
}

/** One `webhook-signature` entry: `v1,` + base64 HMAC of `{id}.{timestamp}.{body}`. */
function standardSignature(id: string, timestamp: string, body: Buffer, key: Buffer): string {
  return "v1," + createHmac("sha256", key).update(`${id}.${timestamp}.`, "utf8").update(body).digest("base64");
}

function headerReader(headers: HeaderSource): (name: string) => string | undefined {
  if (typeof headers.get === "function") {
    const h = headers as { get(name: string): string | null | undefined };
    return (name) => h.get(name) ?? undefined;
  }
  const lower = new Map<string, string>();
  for (const [k, v] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (v !== undefined) lower.set(k.toLowerCase(), Array.isArray(v) ? v.join(", ") : v);
  }
  return (name) => lower.get(name);
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, "utf8");
  const y = Buffer.from(b, "utf8");
  return x.length === y.length && timingSafeEqual(x, y);
}

const fail = (code: WebhookVerificationCode, message: string): VerifyResult => ({
  ok: false,
  error: new WebhookVerificationError(code, message),
});

/**
 * Verifies one delivery against the secrets the receiver holds. Pass the raw body exactly as
 * received: a parsed-and-restringified body has different bytes and will not verify.
 *
 * Returns a failed result for a delivery that does not verify. Throws a TypeError, before it
 * reads the request, for what is wrong on the receiver's side: an unknown scheme, a tolerance that
 * is not a finite number ≥ 0, a malformed secret or none, a body that is not the raw bytes.
 */
export function verifyWebhook(
  rawBody: RawBody,
  headers: HeaderSource,
  secrets: string | readonly string[],
  options?: VerifyOptions,
): VerifyResult {
  const { scheme, toleranceSeconds: tolerance, now } = parseOptions(options);
  const keys = parseSecrets(secrets, scheme);
  const body = bytes(rawBody);
  if (typeof headers !== "object" || headers === null) {
    throw new TypeError(`verifyWebhook: headers must be req.headers or a Fetch Headers, got ${shown(headers)}`);
  }
  const get = headerReader(headers);

  // Fetch joins repeated headers with ", "; the signature values never contain spaces or a
  // trailing comma, so splitting on both recovers every candidate.
  const split = (v: string | undefined) => (v ?? "").split(/\s+/).map((s) => s.replace(/,$/, "")).filter(Boolean);
  const legacyCandidates = [...split(get("x-service-signature")), ...split(get("x-service-signature-previous"))];
  const id = get("webhook-id");
  const ts = get("webhook-timestamp");
  const standardCandidates = split(get("webhook-signature")).filter((s) => s.startsWith("v1,"));
  const hasStandard = Boolean(id && ts && standardCandidates.length > 0);
  const hasLegacy = legacyCandidates.length > 0;

  let matched: Secret | undefined;
  let used: "legacy" | "standard";
  // With both present, `any` uses the standard scheme only: falling back to the legacy header
  // would let a replayed old delivery bypass the timestamp check. (With the webhook-* headers
  // stripped it cannot tell, which is why it is not the default.)
  if (scheme !== "legacy" && (hasStandard || scheme === "standard")) {
    if (!hasStandard) return fail("missing_signature", "missing webhook-id, webhook-timestamp or webhook-signature");
    if (!/^\d{1,15}$/.test(ts!)) return fail("invalid_signature", "webhook-timestamp is not a unix timestamp");
    const nowMs = now();
    // A clock answering NaN would pass every timestamp, as a NaN tolerance did.
    if (typeof nowMs !== "number" || !Number.isFinite(nowMs)) throw new TypeError(`verifyWebhook: options.now() must return milliseconds, got ${shown(nowMs)}`);
    const nowSeconds = Math.floor(nowMs / 1000);
    if (Math.abs(nowSeconds - Number(ts)) > tolerance) {
      return fail("timestamp_out_of_tolerance", `webhook-timestamp is more than ${tolerance}s from now`);
    }
    matched = keys.find((k) => {
      const expected = standardSignature(id!, ts!, body, k.standardKey);
      return standardCandidates.some((c) => safeEqual(c, expected));
    });
    used = "standard";
  } else {
    if (!hasLegacy) return fail("missing_signature", scheme === "legacy" ? "missing X-Service-Signature" : "missing signature headers");
    matched = keys.find((k) => {
      const expected = legacySignature(body, k.legacyKey);
      return legacyCandidates.some((c) => safeEqual(c, expected));
    });
    used = "legacy";
  }
  if (matched === undefined) return fail("invalid_signature", "no signature matches any of the secrets");

  // Only authenticated bytes are parsed, so a forger cannot reach the JSON parser.
  let envelope: unknown;
  try {
    envelope = JSON.parse(body.toString("utf8"));
  } catch {
    return fail("invalid_body", "body is not valid JSON");
  }
  if (typeof envelope !== "object" || envelope === null || Array.isArray(envelope)) {
    return fail("invalid_body", "body is not a JSON object");
  }
  const result = { ok: true as const, envelope: envelope as WebhookEnvelope, scheme: used, secretIndex: matched.index };
  // Kept for readers of 0.2, but out of sight of JSON.stringify and util.inspect, so logging a
  // result does not log the secret.
  Object.defineProperty(result, "secretUsed", { value: matched.secret, enumerable: false });
  return result as VerifySuccess;
}
