// What a client does with its connection is the client's doing, and is answered as such: a body
// it stops sending is a 400, never the "database unreachable" 503 its ECONNRESET read as; a body
// it asks leave to send (Expect: 100-continue) is invited only when it may be read; a request
// Node's parser refuses, or that outlives its deadline, is answered in the API's error shape with
// a request id. HTTP-level behaviour, the same on both backends: it runs on PGlite.
import { Writable } from "node:stream";
import { gzipSync } from "node:zlib";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { onSocket, startHarness, type Harness, type Socket } from "./support/app.ts";
import { converse, lastAnswer } from "./support/raw-http.ts";

describe("client connections", () => {
  let h: Harness;
  let socket: Socket;
  let port: number;
  const logs: Array<Record<string, unknown>> = [];

  beforeAll(async () => {
    const sink = new Writable({ write: (chunk, _e, cb) => (logs.push(JSON.parse(String(chunk))), cb()) });
    const logger = pino({ level: "info" }, sink);
    h = await startHarness("pglite", { logger });
    // with a request deadline a test can wait out
    socket = await onSocket(h, { logger, deadlines: { requestMs: 1_500, headersMs: 1_000, checkEveryMs: 250 } });
    port = socket.port;
  });
  afterAll(async () => {
    await socket?.close();
    await h?.close();
  });

  const head = (path: string, extra: string) =>
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${h.publishableKey}\r\nContent-Type: application/json\r\n${extra}\r\n`;
  const requestLog = (requestId: string) => logs.find((l) => l.msg === "request" && l.requestId === requestId);

  it.each(["/auth/otp/start", "/graphql"])("a body cut off by a reset is a 400 on %s, never a database outage", async (path) => {
    const requestId = `cut-off-${path.replace(/\W/g, "")}`;
    await converse(port, (s) => {
      s.write(head(path, `X-Request-Id: ${requestId}\r\nContent-Length: 60\r\n`) + `{"email":"a@example.com"`);
      setTimeout(() => s.resetAndDestroy(), 200);
    });
    await expect.poll(() => requestLog(requestId)).toMatchObject({ status: 400 });
    expect(logs.filter((l) => l.msg === "database unreachable")).toEqual([]);
    expect(logs.filter((l) => l.requestId === requestId && (l.level as number) >= 40)).toEqual([]);
  });

  it("a chunked body cut off by a reset is a 400 too", async () => {
    const requestId = "cut-off-chunked";
    await converse(port, (s) => {
      s.write(head("/auth/otp/start", `X-Request-Id: ${requestId}\r\nTransfer-Encoding: chunked\r\n`) + `5\r\n{"ema\r\n`);
      setTimeout(() => s.resetAndDestroy(), 200);
    });
    await expect.poll(() => requestLog(requestId)).toMatchObject({ status: 400 });
    expect(logs.filter((l) => l.msg === "database unreachable")).toEqual([]);
  });

  it("Expect: 100-continue with a length over the limit is refused with 413 and no invitation to send it", async () => {
    const raw = await converse(port, (s) => s.write(head("/auth/otp/start", `Content-Length: 2000000\r\nExpect: 100-continue\r\n`)));
    expect(raw).not.toContain("100 Continue");
    const answer = lastAnswer(raw);
    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.body)).toMatchObject({ error: "PayloadTooLarge" });
  });

  it("Expect: 100-continue within the limit is invited, and the body is read", async () => {
    const body = `{"email":"continue@example.com"}`;
    const raw = await converse(port, (s) => {
      s.write(head("/auth/otp/start", `Content-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n`));
      s.once("data", () => s.write(body)); // only once invited
    });
    expect(raw.startsWith("HTTP/1.1 100 Continue\r\n")).toBe(true);
    const answer = lastAnswer(raw);
    expect(answer.status, answer.body).toBe(200);
    expect(JSON.parse(answer.body)).toHaveProperty("state_id");
  });

  it.each(["/auth/otp/start", "/graphql"])("an expectation other than 100-continue on %s is answered by the app, as if not asked", async (path) => {
    // Node's own answer was a bare 417: no body, no X-Request-Id, no nosniff (docs/rest.md, "Bodies")
    const body = path === "/graphql" ? `{"query":"{ __typename }"}` : `{"email":"expect-other@example.com"}`;
    const raw = await converse(port, (s) => s.write(head(path, `Content-Length: ${body.length}\r\nExpect: something-else\r\nConnection: close\r\n`) + body));
    const answer = lastAnswer(raw);
    expect(answer.status, answer.raw).toBe(200);
    expect(answer.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
    expect(answer.headers["x-content-type-options"]).toBe("nosniff");
    expect(JSON.parse(answer.body)).toEqual(path === "/graphql" ? { data: { __typename: "Query" } } : { state_id: expect.stringMatching(/^otp_/) });
  });

  it.each(["/auth/otp/start", "/graphql"])("a compressed body on %s is 415 UnsupportedMediaType, not read as text", async (path) => {
    const body = gzipSync(path === "/graphql" ? `{"query":"{ __typename }"}` : `{"email":"gzip@example.com"}`);
    const raw = await converse(port, (s) => {
      s.write(head(path, `Content-Encoding: gzip\r\nContent-Length: ${body.length}\r\nConnection: close\r\n`));
      s.write(body);
    });
    const answer = lastAnswer(raw);
    expect(answer.status).toBe(415);
    expect(JSON.parse(answer.body)).toEqual({ error: "UnsupportedMediaType", message: "send the body without a Content-Encoding" });
  });

  it.each(["/auth/otp/start", "/graphql"])("a body compressed as a transfer coding on %s is 415 too, not read as text", async (path) => {
    const body = gzipSync(path === "/graphql" ? `{"query":"{ __typename }"}` : `{"email":"gzip-te@example.com"}`);
    const raw = await converse(port, (s) => {
      s.write(head(path, `Transfer-Encoding: gzip, chunked\r\nConnection: close\r\n`));
      s.write(Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from("\r\n0\r\n\r\n")]));
    });
    const answer = lastAnswer(raw);
    expect(answer.status, answer.body).toBe(415);
    expect(JSON.parse(answer.body)).toEqual({ error: "UnsupportedMediaType", message: "send the body with no Transfer-Encoding but chunked" });
  });

  it.each([
    ["two Content-Lengths", "Content-Length: 2\r\nContent-Length: 2\r\n", "{}", "not valid HTTP/1.1"],
    ["Content-Length beside Transfer-Encoding", "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n", "not valid HTTP/1.1"],
    ["headers over Node's 16 KiB", `X-Pad: ${"x".repeat(17_000)}\r\nContent-Length: 2\r\n`, "{}", "headers are too large"],
  ])("%s: a 400 in the error shape with a request id, and the connection closed", async (_name, extra, body, reason) => {
    const answer = lastAnswer(await converse(port, (s) => s.write(head("/auth/otp/start", extra) + body)));
    expect(answer.status).toBe(400);
    expect(answer.headers["content-type"]).toBe("application/json");
    expect(answer.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
    expect(answer.headers.connection).toBe("close");
    expect(JSON.parse(answer.body)).toEqual({ error: "InvalidRequest", message: expect.stringContaining(reason) });
    expect(logs).toContainEqual(expect.objectContaining({ msg: "request refused before the app", requestId: answer.headers["x-request-id"] }));
  });

  it("a body that stalls past the request deadline is cut off: the connection closes with a 400 in the error shape", async () => {
    const raw = await converse(port, (s) => s.write(head("/auth/otp/start", "Content-Length: 60\r\n") + `{"email":`));
    const answer = lastAnswer(raw);
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toMatchObject({ error: "InvalidRequest" });
    expect(logs.filter((l) => l.msg === "database unreachable")).toEqual([]);
  });
});
