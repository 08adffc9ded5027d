// JSON bodies for the REST routes: application/json only, at most 64 KiB, an object whose
// fields are exactly the ones the route knows. Everything else is a clear 4xx.
// Strings must be storable: Postgres text refuses NUL (22021) and UTF-8 cannot carry a lone
// surrogate, so such input is refused here, before it reaches a query, not as a 500 there.
import type { Context, MiddlewareHandler } from "hono";
import { InvalidRequest, PayloadTooLarge, UnsupportedMediaType } from "../errors.ts";
import { unstorableTextPath } from "../text.ts";

export const BODY_LIMIT = 64 * 1024;

/** `application/json`, in any case, with or without parameters (a charset). */
const JSON_TYPE = /^application\/json\s*(;|$)/i;

const tooLarge = () => new PayloadTooLarge(`the body is larger than ${BODY_LIMIT} bytes`);

/**
 * The length a request declares for its body, if it declares one that framing enforces: Node's
 * HTTP parser never hands on more bytes than Content-Length says (and ignores it under
 * Transfer-Encoding). null: the body, if any, comes in chunks of unknown total, or was built in
 * process (a fetch Request carries no Content-Length of its own).
 */
function declaredLength(req: Request): number | null {
  const declared = req.headers.get("content-length");
  if (declared === null || req.headers.has("transfer-encoding")) return null;
  const n = Number(declared);
  return Number.isSafeInteger(n) && n >= 0 ? n : null;
}

/**
 * The request's body bytes, at most BODY_LIMIT of them, else PayloadTooLarge: every body the app
 * reads is read here. A body of declared length is refused from its header alone or read in one
 * piece; on @hono/node-server that read comes straight from the socket. Touching `request.body`
 * instead makes the adapter build a web Request and a web stream for it: in a profile of the link
 * benchmark that was 88 µs of CPU per REST request (bench/RESULTS.md, link). A body of unknown
 * length is read as a stream and counted as it comes, so a sender of endless chunks is cut off at
 * the limit.
 */
export async function readBody(req: Request): Promise<Uint8Array<ArrayBuffer>> {
  refuseEncoded(req);
  const declared = declaredLength(req);
  if (declared !== null && declared > BODY_LIMIT) throw tooLarge();
  if (declared === null && req.body) return readCounted(req.body);
  const bytes = new Uint8Array(await fromClient(req.arrayBuffer()));
  if (bytes.byteLength > BODY_LIMIT) throw tooLarge(); // an in-process Request may declare less than it holds
  return bytes;
}

/**
 * Bodies are read as sent: a compressed one (Content-Encoding: gzip, …) was parsed as its
 * compressed bytes and refused as text that is not UTF-8. It is a media type this service does
 * not take (RFC 9110 15.5.16), and a decompressed size would need a bound of its own.
 */
function refuseEncoded(req: Request): void {
  const encoding = req.headers.get("content-encoding");
  if (encoding !== null && !/^\s*identity\s*$/i.test(encoding)) throw new UnsupportedMediaType("send the body without a Content-Encoding");
  // Node's parser takes `Transfer-Encoding: gzip, chunked` and undoes only the chunking: the
  // compressed bytes were read as the body, the same fault as above, refused the same way.
  const transfer = req.headers.get("transfer-encoding");
  if (transfer !== null && !/^\s*chunked\s*$/i.test(transfer)) throw new UnsupportedMediaType("send the body with no Transfer-Encoding but chunked");
}

/**
 * A body read that fails is the client's doing: it closed or reset its connection before the
 * body was complete (or the server's deadline for a request ended it, src/http/server.ts). Left
 * as it comes, its ECONNRESET read as a database that cannot be reached (src/db/faults.ts): a
 * 503 with a "database unreachable" warning that any client could cause at will.
 */
async function fromClient<T>(read: Promise<T>): Promise<T> {
  try {
    return await read;
  } catch (err) {
    throw new InvalidRequest(`the body ended before it was complete (${describeAbort(err)})`);
  }
}

const describeAbort = (err: unknown) => (err instanceof Error ? (err as NodeJS.ErrnoException).code ?? err.message : String(err));

async function readCounted(body: ReadableStream<Uint8Array>): Promise<Uint8Array<ArrayBuffer>> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = (body as unknown as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
  for (;;) {
    const { done, value: chunk } = await fromClient(reader.next());
    if (done) break;
    size += chunk.byteLength;
    if (size > BODY_LIMIT) {
      await reader.return?.();
      throw tooLarge();
    }
    chunks.push(chunk);
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
}

/**
 * A form-encoded body (an identity provider's `form_post` answer), read like every other body:
 * within BODY_LIMIT, else PayloadTooLarge. Its fields are percent-encoded ASCII, so bytes that
 * are not UTF-8 only garble a value, which the caller then does not recognise.
 */
export async function formBody(req: Request): Promise<URLSearchParams> {
  return new URLSearchParams(new TextDecoder().decode(await readBody(req)));
}

/**
 * For routes whose handler reads the body itself (GraphQL): a declared length over the limit is
 * refused before anything is read, a declared length within it passes untouched (the handler's
 * own read is then bounded by it), and a body of unknown length is read here, bounded, and handed
 * on in full.
 */
export const limitBody: MiddlewareHandler = async (c, next) => {
  const req = c.req.raw;
  refuseEncoded(req);
  const declared = declaredLength(req);
  if (declared !== null) {
    if (declared > BODY_LIMIT) throw tooLarge();
  } else if (req.body) {
    c.req.raw = new Request(req, { body: await readCounted(req.body) });
  }
  await next();
};

/**
 * What /graphql takes (docs/graphql.md): a POST of `application/json`, or a GET whose
 * `variables` and `extensions`, when given, are JSON objects (or null). yoga also parsed forms, multipart
 * uploads and `application/graphql`: a form or multipart POST is a request any web page can make
 * without asking (no CORS preflight), and a malformed `variables` in any of them, or in a GET's
 * query string, reached an unguarded JSON.parse and came back as a masked 500.
 */
export const graphqlRequest: MiddlewareHandler = async (c, next) => {
  const method = c.req.method;
  const type = c.req.header("content-type") ?? "";
  if (method === "POST" && !JSON_TYPE.test(type)) throw new UnsupportedMediaType("send the operation as Content-Type: application/json");
  if (method === "POST" && !type.startsWith("application/json")) {
    // media types are case-insensitive (RFC 9110 8.3.1); yoga answered an empty 415 to `Application/JSON`
    const headers = new Headers(c.req.raw.headers);
    headers.set("content-type", type.replace(/^application\/json/i, "application/json"));
    c.req.raw = new Request(c.req.raw, { headers });
  }
  if (method === "GET") {
    const params = new URL(c.req.url).searchParams;
    for (const name of ["variables", "extensions"]) {
      const value = params.get(name);
      if (value !== null && !isJsonObject(value)) throw new InvalidRequest(`${name} must be a JSON object`);
    }
  }
  await next();
};

function isJsonObject(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && !Array.isArray(value); // null too: some clients send it for none
  } catch {
    return false;
  }
}

export async function jsonBody(c: Context, allowed: readonly string[]): Promise<Record<string, unknown>> {
  const type = c.req.header("content-type") ?? "";
  const text = utf8(await readBody(c.req.raw));
  // A POST with no body at all (e.g. unmerge), or only white space, needs no content type
  // (docs/rest.md, "Bodies"); any other body must be JSON. A body of white space without one was
  // 415, though the docs count it as {} with or without a Content-Type.
  if (text.trim() === "" && !type) return checkFields({}, allowed);
  if (!JSON_TYPE.test(type)) throw new UnsupportedMediaType("send the body as Content-Type: application/json");
  let body: unknown;
  try {
    body = text.trim() === "" ? {} : JSON.parse(text);
  } catch {
    throw new InvalidRequest("the body is not valid JSON");
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new InvalidRequest("the body must be a JSON object");
  const bad = unstorableTextPath(body);
  if (bad !== undefined) throw new InvalidRequest(`${bad || "the body"} contains a NUL character or an unpaired surrogate`);
  return checkFields(body as Record<string, unknown>, allowed);
}

/**
 * Only the documented fields, and none of them null: no REST body field takes null (docs/rest.md),
 * so `{"email": null, "phone": "+1…"}` is a body with both fields, one of the wrong type, not a
 * phone alone (31st review). GraphQL differs on purpose: there an explicit null argument is how
 * clients leave one out.
 */
function checkFields(body: Record<string, unknown>, allowed: readonly string[]) {
  const unknown = Object.keys(body).filter((k) => !allowed.includes(k));
  if (unknown.length) throw new InvalidRequest(`unexpected field${unknown.length > 1 ? "s" : ""}: ${unknown.join(", ")}`);
  const nulls = Object.keys(body).filter((k) => body[k] === null);
  if (nulls.length) throw new InvalidRequest(`${nulls.join(", ")} cannot be null: leave ${nulls.length > 1 ? "them" : "it"} out instead`);
  return body;
}

function utf8(bytes: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new InvalidRequest("the body is not valid UTF-8");
  }
}

/** A field that must be a string when present. */
export function str(body: Record<string, unknown>, key: string): string | undefined {
  const v = body[key];
  if (v === undefined) return undefined;
  if (typeof v !== "string") throw new InvalidRequest(`${key} must be a string`);
  return v;
}
