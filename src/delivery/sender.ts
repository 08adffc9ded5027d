// One delivery attempt over HTTP: vet the target, sign, POST, keep the first KiB of the answer.
//
// Connections are pooled (keep-alive) in one undici Agent per sender. Every attempt first
// re-validates the URL with assertSafeTarget, which also resolves the host; the Agent's
// connect-time `lookup` answers only with the addresses vetted for that host, so a DNS answer
// that changes between the check and the connection (DNS rebinding) cannot steer a new
// connection to an internal address. Redirects are never followed (undici's request() does
// not follow them without the redirect interceptor, which is not installed): a 3xx is a
// failed attempt like any other non-2xx.
import { createHash } from "node:crypto";
import type { LookupAddress } from "node:dns";
import { isIP } from "node:net";
import type { Socket } from "node:net";
import { Agent, buildConnector, errors as undiciErrors, request } from "undici";
import { gunzipSync, inflateSync, brotliDecompressSync, constants as zlibConstants } from "node:zlib";
import { describeSendError as describe, watchConnection } from "./endpoint-errors.ts";
import { signatureHeaders, type LiveSecrets } from "../webhooks/signing.ts";
import { assertSafeTarget, pinnedLookup, UnsafeWebhookTarget, type LookupFn, type ResolvedAddress } from "../webhooks/target-guard.ts";
import { SUCCESS_STATUSES } from "./schedule.ts";

/** How much of a response body is kept in the attempt log. */
export const EXCERPT_BYTES = 1024;
/** A response body up to this size is read to its end so the connection can be reused; a bigger one is cut. */
const DRAIN_BYTES = 64 * 1024;
const USER_AGENT = "linkgate-webhooks/1";

export type SendInput = {
  url: string;
  /** The stored envelope; sent byte for byte. */
  body: string;
  eventId: string;
  eventType: string;
  attempt: number;
  /** The secrets live at send time (liveSecrets(webhook, now)). */
  secrets: LiveSecrets;
};

export type SendResult = {
  /** When the attempt began; its whole seconds are the signature timestamp (`webhook-timestamp`). */
  startedAt: Date;
  durationMs: number;
  /** Null when no HTTP response arrived. */
  statusCode: number | null;
  /** The Retry-After response header, for the schedule. */
  retryAfter: string | null;
  /** Why no usable response arrived (or why the status is not a success), for the log. */
  error: string | null;
  /** Up to EXCERPT_BYTES of the response body, decoded as UTF-8. */
  responseExcerpt: string | null;
  /** The request headers actually sent (signatures included, never the secret); {} when nothing was sent. */
  requestHeaders: Record<string, string>;
  /**
   * Whether a request went out to the receiver's address (it passed the target check and was
   * signed), whatever came back: a refused connection reached the network, a refused target
   * did not. The breaker judges an endpoint only by attempts that reached it (breaker.ts), and
   * the attempt log names the signing secrets only for them.
   */
  reached: boolean;
};

export type SenderOptions = {
  timeoutMs: number;
  allowPrivate: boolean;
  /** DNS resolution for the target check; defaults to the system resolver. */
  lookup?: LookupFn;
  /** Clock (ms) for startedAt and the signature timestamp. */
  now?: () => number;
};

export type Sender = {
  send(input: SendInput, signal?: AbortSignal): Promise<SendResult>;
  close(): Promise<void>;
};


export function createSender(opts: SenderOptions): Sender {
  const now = opts.now ?? Date.now;
  // hostname -> the addresses the latest successful check vetted for it.
  const vetted = new Map<string, ResolvedAddress[]>();

  const connector = buildConnector({ timeout: opts.timeoutMs, lookup: pinnedLookup(vetted) as never });
  const agent = new Agent({
    keepAliveTimeout: 30_000,
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
    // undici's own connector, watched so that a refused certificate can be described (which one,
    // expired when) once the connection is gone: endpoint-errors.ts
    connect: (options, callback) => {
      let mark: (err: Error) => Error = (err) => err;
      const socket = (connector as unknown as (o: typeof options, cb: typeof callback) => Socket | undefined)(options, (err, s) =>
        err ? callback(mark(err), null) : callback(null, skipInterimContinue(s as unknown as Socket) as never),
      );
      mark = watchConnection(socket);
      return socket;
    },
  });

  async function send(input: SendInput, signal?: AbortSignal): Promise<SendResult> {
    const startedMs = now();
    const startedAt = new Date(startedMs);
    const t0 = performance.now();
    const elapsed = () => Math.round(performance.now() - t0);
    const base = { startedAt, retryAfter: null, responseExcerpt: null };
    const host = hostOf(input.url);

    // One deadline for the whole attempt: resolving the host, connecting, the headers and the body.
    const deadline = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      deadline.abort(new Error("timeout"));
    }, opts.timeoutMs);
    const onOuterAbort = () => deadline.abort(signal?.reason ?? new Error("aborted"));
    if (signal?.aborted) onOuterAbort();
    else signal?.addEventListener("abort", onOuterAbort, { once: true });
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onOuterAbort);
    };

    try {
      const addresses = await assertSafeTarget(input.url, { allowPrivate: opts.allowPrivate, lookup: opts.lookup, signal: deadline.signal });
      if (host && !isIP(host)) remember(vetted, host, addresses);
    } catch (err) {
      done();
      if (host) vetted.delete(host);
      const message = timedOut
        ? `timeout: the host did not resolve within ${opts.timeoutMs} ms`
        : signal?.aborted
          ? "aborted: the worker stopped before the host resolved"
          : err instanceof UnsafeWebhookTarget
            ? `target refused: ${err.message}`
            : `target check failed: ${describe(err)}`;
      return { ...base, durationMs: elapsed(), statusCode: null, error: message, requestHeaders: {}, reached: false };
    }

    const headers = requestHeaders({ ...input, timestamp: Math.floor(startedMs / 1000) });

    try {
      const res = await request(input.url, {
        method: "POST",
        headers,
        body: input.body,
        dispatcher: agent,
        signal: deadline.signal,
      });
      const { excerpt, broken } = await readExcerpt(res.body, headerValue(res.headers["content-encoding"]));
      if (timedOut) {
        // the status came, the body did not finish: no complete answer, so no delivery (a
        // receiver dripping its body would otherwise hold a send slot for the whole timeout and
        // still count as delivered)
        const error = `timeout: HTTP ${res.statusCode} arrived, its body did not finish within ${opts.timeoutMs} ms`;
        return { startedAt, durationMs: elapsed(), statusCode: null, retryAfter: null, error, responseExcerpt: excerpt, requestHeaders: headers, reached: true };
      }
      if (broken && SUCCESS_STATUSES.has(res.statusCode)) {
        // a receiver that crashed mid-answer may not have kept the event: not a delivery
        // (a 200 whose body broke off counted as one: fifteenth review). Any other status says
        // what it says (a 410, a 429's Retry-After) whole or not (sixteenth review)
        const error = `connection broke: HTTP ${res.statusCode} arrived, its body did not finish (${describe(broken)})`;
        return { startedAt, durationMs: elapsed(), statusCode: null, retryAfter: null, error, responseExcerpt: excerpt, requestHeaders: headers, reached: true };
      }
      const retryAfter = headerValue(res.headers["retry-after"]);
      const ok = SUCCESS_STATUSES.has(res.statusCode);
      const error = ok ? null : statusError(res.statusCode, headerValue(res.headers["location"]), Buffer.byteLength(input.body));
      return { startedAt, durationMs: elapsed(), statusCode: res.statusCode, retryAfter, error, responseExcerpt: excerpt, requestHeaders: headers, reached: true };
    } catch (err) {
      const error = timedOut || err instanceof undiciErrors.HeadersTimeoutError || err instanceof undiciErrors.ConnectTimeoutError
        ? `timeout: no response within ${opts.timeoutMs} ms`
        : signal?.aborted
          ? "aborted: the worker stopped before a response arrived"
          : describe(err);
      return { ...base, durationMs: elapsed(), statusCode: null, error, requestHeaders: headers, reached: true };
    } finally {
      done();
    }
  }

  return {
    send,
    async close() {
      await agent.close().catch(() => agent.destroy());
    },
  };
}

/**
 * Every header of one attempt: the signatures (docs/webhooks.md, "A delivery" and "Signatures")
 * and the User-Agent. A function of the body, the event, the attempt number, the timestamp and
 * the secrets alone, which is why the attempt log stores none of it (log.ts rebuilds it for
 * display).
 */
export function requestHeaders(input: Omit<SendInput, "url"> & { timestamp: number }): Record<string, string> {
  return { ...signatureHeaders(input), "User-Agent": USER_AGENT };
}

/**
 * Names a secret in the attempt log without revealing it: the first 16 hex digits of its
 * SHA-256. The secret is 32 random bytes, so this says which secret signed and nothing more.
 */
export function secretRef(secret: string): string {
  return createHash("sha256").update(secret, "utf8").digest("hex").slice(0, 16);
}

function hostOf(url: string): string | null {
  try {
    return new URL(url).hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  } catch {
    return null;
  }
}

function remember(map: Map<string, ResolvedAddress[]>, host: string, addresses: ResolvedAddress[]): void {
  map.delete(host);
  map.set(host, addresses);
  // Bounded: the oldest host is forgotten first (it is re-vetted on its next attempt anyway).
  if (map.size > 10_000) map.delete(map.keys().next().value!);
}

/**
 * Keeps the first EXCERPT_BYTES; drains a small body to its end so the connection is reused.
 * `broken`: the body broke off (a reset, malformed chunks, the deadline) before its end and
 * before DRAIN_BYTES; what arrived is kept as the excerpt.
 */
async function readExcerpt(body: AsyncIterable<Buffer> & { destroy(err?: Error): void }, encoding: string | null): Promise<{ excerpt: string; broken: unknown }> {
  const kept: Buffer[] = [];
  let keptBytes = 0;
  let total = 0;
  let broken: unknown = null;
  try {
    for await (const chunk of body) {
      if (keptBytes < EXCERPT_BYTES) {
        const part = chunk.subarray(0, EXCERPT_BYTES - keptBytes);
        kept.push(part);
        keptBytes += part.length;
      }
      total += chunk.length;
      if (total > DRAIN_BYTES) break; // leaving the loop destroys the body and its connection
    }
  } catch (err) {
    broken = err ?? new Error("the body broke off");
  }
  return { excerpt: keptBytes === 0 && total === 0 ? "" : decoded(Buffer.concat(kept), encoding), broken };
}

/**
 * The excerpt as the receiver meant it. No Accept-Encoding is sent, yet some receivers compress
 * their answer anyway, and its bytes read as UTF-8 were noise in the log (docs/webhooks.md). Only
 * the kept bytes are decoded, as far as they go, and at most 1 MiB comes out of them.
 */
function decoded(kept: Buffer, encoding: string | null): string {
  const coding = encoding?.trim().toLowerCase();
  if (!coding || coding === "identity") return kept.toString("utf8");
  const partial = { finishFlush: zlibConstants.Z_SYNC_FLUSH, maxOutputLength: 1 << 20 };
  try {
    const out =
      coding === "gzip" || coding === "x-gzip"
        ? gunzipSync(kept, partial)
        : coding === "deflate"
          ? inflateSync(kept, partial)
          : coding === "br"
            ? brotliDecompressSync(kept, { finishFlush: zlibConstants.BROTLI_OPERATION_FLUSH, maxOutputLength: 1 << 20 })
            : null;
    if (out) return out.subarray(0, EXCERPT_BYTES).toString("utf8");
  } catch {
    // not what it says it is: say so below rather than show its bytes as text
  }
  return `[a ${coding.slice(0, 40)}-encoded body of which the first ${kept.length} bytes could not be decoded]`;
}

/** The status line of an interim `100 Continue`: `HTTP/1.0 100` or `HTTP/1.1 100`, then a space or the line's end. */
const CONTINUE_LINE = "HTTP/1.x 100 ";
const continueLineStarts = (b: Buffer): boolean => {
  for (let i = 0; i < Math.min(b.length, CONTINUE_LINE.length); i++) {
    const c = String.fromCharCode(b[i]);
    const ok = i === 7 ? c === "0" || c === "1" : i === CONTINUE_LINE.length - 1 ? c === " " || c === "\r" : c === CONTINUE_LINE[i];
    if (!ok) return false;
  }
  return true;
};

/**
 * Drops the interim `100 Continue` answers a receiver sends ahead of its answer to a delivery
 * (docs/webhooks.md, "Answers, retries and the schedule"). Deliveries never ask for one (no
 * `Expect` header), but some servers send one before every answer to a POST, and HTTP says a
 * client must take 1xx answers it did not ask for (RFC 9110, 15.2). undici takes an unasked
 * 100 for a broken connection: the receiver's 200 that followed was never read, and the attempt
 * failed as "connection reset before a response". Other 1xx answers (`103 Early Hints`) undici
 * skips itself.
 *
 * undici reads a connection with read() (one request on it at a time): after each request's
 * head is written, the first bytes read are checked for interim 100 answers, which are dropped whole
 * (status line and headers, up to the blank line); bytes that might still become one are held
 * until more arrive. The first byte of anything else ends the check until the next request.
 */
export function skipInterimContinue<S extends Socket>(socket: S): S {
  const read = socket.read;
  const write = socket.write;
  /** A request went out and no byte of its answer has been passed on yet. */
  let atAnswer = false;
  let held: Buffer | null = null;
  socket.write = function (this: S, ...args: unknown[]) {
    // a request's head (undici writes it as one string, its body after it): its answer comes next
    if (typeof args[0] === "string" && args[0].startsWith("POST ")) atAnswer = true;
    return (write as (...a: unknown[]) => boolean).apply(this, args);
  } as S["write"];
  socket.read = function (this: S, size?: number) {
    if (!atAnswer && held === null) return read.call(this, size);
    for (;;) {
      const chunk: Buffer | null = read.call(this);
      if (chunk === null) return null; // what is held waits for more
      let buf = held ? Buffer.concat([held, chunk]) : chunk;
      held = null;
      while (atAnswer && buf.length > 0) {
        if (!continueLineStarts(buf)) {
          atAnswer = false;
          break;
        }
        const end = buf.length < CONTINUE_LINE.length ? -1 : buf.indexOf("\r\n\r\n");
        if (end < 0) {
          held = buf;
          buf = Buffer.alloc(0);
          break;
        }
        buf = buf.subarray(end + 4);
      }
      if (buf.length > 0) return buf;
    }
  } as S["read"];
  return socket;
}

function headerValue(v: string | string[] | undefined): string | null {
  if (v === undefined) return null;
  return Array.isArray(v) ? v.join(", ") : v;
}

/** The log's text for a status that is not a success: what it means for the endpoint (docs/webhooks.md, "What the log says"). */
function statusError(status: number, location: string | null, bodyBytes: number): string {
  if (status >= 300 && status < 400) {
    return `HTTP ${status}: redirect not followed${location ? ` (to ${location.slice(0, 200)})` : ""}; redirects are never followed: set the webhook's URL to the address the endpoint moved to`;
  }
  if (status === 401 || status === 403) {
    return `HTTP ${status}: the receiver, or something in front of it, refused the request: it should let deliveries through and check their signature with the webhook's current secret instead of asking for credentials`;
  }
  if (status === 410) return "HTTP 410: the receiver says the endpoint is gone";
  if (status === 413) return `HTTP 413: the receiver refused the body as too large (${bodyBytes} bytes): raise its limit`;
  return `HTTP ${status}`;
}

