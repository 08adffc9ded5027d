// @linkgate/receiver: verifies linkgate webhook deliveries. Integrators install this package on
// its own, so it imports nothing but node:crypto, and its public types mention no Node or DOM
// type: a TypeScript project compiles against it without @types/node or lib "dom".
import { createHmac, timingSafeEqual } from "node:crypto";

/** The request body exactly as received (a Node `Buffer` is a `Uint8Array`). */
export type RawBody = string | Uint8Array;

export type WebhookVerificationCode =
  | "missing_signature"
  | "invalid_signature"
  | "timestamp_out_of_tolerance"
  | "invalid_body";

export class WebhookVerificationError extends Error {
  readonly code: WebhookVerificationCode;
  /** The HTTP status a receiver should answer with. */
  readonly status: 400 | 401;
  constructor(code: WebhookVerificationCode, message: string) {
    super(message);
    this.name = "WebhookVerificationError";
    this.code = code;
    this.status = code === "missing_signature" || code === "invalid_body" ? 400 : 401;
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

export type VerifyResult =
  | { ok: true; envelope: WebhookEnvelope; secretUsed?: string; scheme: "legacy" | "standard" }
  | { ok: false; error: WebhookVerificationError };

export interface VerifyOptions {
  /** Allowed clock difference for `webhook-timestamp`, in seconds. Default 300. */
  toleranceSeconds?: number;
  /** Current time in milliseconds; injectable for tests. */
  now?: () => number;
  /**
   * `standard` (default): Standard Webhooks only, whose signed timestamp refuses a replayed old
   * delivery; linkgate signs every delivery with it. `legacy` (X-Service-Signature) signs the
   * body alone, so a captured delivery verifies forever; `any` takes either, and so takes a
   * replay whose webhook-* headers were stripped. Both are opt-ins for receivers that cannot
   * read the webhook-* headers.
   */
  scheme?: "legacy" | "standard" | "any";
}

/** `req.headers` of node:http or Express, or anything with `get(name)` such as a Fetch `Headers`. */
export type HeaderSource =
  | { get(name: string): string | null | undefined }
  | Record<string, string | string[] | undefined>;

const PREFIX = "whsec_";

function bytes(body: RawBody): Buffer {
  if (typeof body === "string") return Buffer.from(body, "utf8");
  return Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

/**
 * The Standard Webhooks HMAC key: the base64-decoded part after `whsec_`. A missing prefix is
 * tolerated, as the reference `standardwebhooks` library does.
 */
function standardKey(secret: string): Buffer {
  const key = Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, "base64");
  // An empty key would make every HMAC forgeable by anyone who knows the scheme.
  if (key.length === 0) throw new TypeError("webhook secret has an empty key");
  return key;
}

/** `X-Service-Signature`: keyed with the UTF-8 bytes of the whole secret string, `whsec_` included. */
function legacySignature(body: Buffer, secret: string): string {
  return "sha256=" + createHmac("sha256", Buffer.from(secret, "utf8")).update(body).digest("hex");
}

/** One `webhook-signature` entry: `v1,` + base64 HMAC of `{id}.{timestamp}.{body}`. */
function standardSignature(id: string, timestamp: string, body: Buffer, secret: string): string {
  return "v1," + createHmac("sha256", standardKey(secret)).update(`${id}.${timestamp}.`, "utf8").update(body).digest("base64");
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
 */
export function verifyWebhook(
  rawBody: RawBody,
  headers: HeaderSource,
  secrets: string | string[],
  options: VerifyOptions = {},
): VerifyResult {
  const keys = (Array.isArray(secrets) ? secrets : [secrets]).filter((s) => typeof s === "string" && s !== "");
  if (keys.length === 0) throw new TypeError("verifyWebhook needs at least one secret");
  const scheme = options.scheme ?? "standard";
  const get = headerReader(headers);
  const body = bytes(rawBody);

  // Fetch joins repeated headers with ", "; the signature values never contain spaces or a
  // trailing comma, so splitting on both recovers every candidate.
  const split = (v: string | undefined) => (v ?? "").split(/\s+/).map((s) => s.replace(/,$/, "")).filter(Boolean);
  const legacyCandidates = [...split(get("x-service-signature")), ...split(get("x-service-signature-previous"))];
  const id = get("webhook-id");
  const ts = get("webhook-timestamp");
  const standardCandidates = split(get("webhook-signature")).filter((s) => s.startsWith("v1,"));
  const hasStandard = Boolean(id && ts && standardCandidates.length > 0);
  const hasLegacy = legacyCandidates.length > 0;

  let secretUsed: string | undefined;
  let used: "legacy" | "standard";
  // With both present, `any` uses the standard scheme only: falling back to the legacy header
  // would let a replayed old delivery bypass the timestamp check. (With the webhook-* headers
  // stripped it cannot tell, which is why it is not the default.)
  if (scheme !== "legacy" && (hasStandard || scheme === "standard")) {
    if (!hasStandard) return fail("missing_signature", "missing webhook-id, webhook-timestamp or webhook-signature");
    if (!/^\d{1,15}$/.test(ts!)) return fail("invalid_signature", "webhook-timestamp is not a unix timestamp");
    const nowSeconds = Math.floor((options.now ?? Date.now)() / 1000);
    const tolerance = options.toleranceSeconds ?? 300;
    if (Math.abs(nowSeconds - Number(ts)) > tolerance) {
      return fail("timestamp_out_of_tolerance", `webhook-timestamp is more than ${tolerance}s from now`);
    }
    secretUsed = keys.find((k) => {
      const expected = standardSignature(id!, ts!, body, k);
      return standardCandidates.some((c) => safeEqual(c, expected));
    });
    used = "standard";
  } else {
    if (!hasLegacy) return fail("missing_signature", scheme === "legacy" ? "missing X-Service-Signature" : "missing signature headers");
    secretUsed = keys.find((k) => {
      const expected = legacySignature(body, k);
      return legacyCandidates.some((c) => safeEqual(c, expected));
    });
    used = "legacy";
  }
  if (secretUsed === undefined) return fail("invalid_signature", "no signature matches any of the secrets");

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
  return { ok: true, envelope: envelope as WebhookEnvelope, secretUsed, scheme: used };
}
