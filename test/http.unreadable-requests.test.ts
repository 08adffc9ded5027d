// Requests @hono/node-server cannot make a URL of (a Host header that is no host, a backslash in
// the path, `GET *`) never reach the app: they are answered in the error shape with a request id,
// and logged, as every refused request is (docs/rest.md, "Conventions"), not with a bare 400.
// HTTP-level behaviour, the same on both backends: it runs on PGlite.
import { Writable } from "node:stream";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { onSocket, startHarness, type Harness, type Socket } from "./support/app.ts";
import { converse, lastAnswer } from "./support/raw-http.ts";

describe("requests refused before the app", () => {
  let h: Harness;
  let socket: Socket;
  const logs: Array<Record<string, unknown>> = [];

  beforeAll(async () => {
    const sink = new Writable({ write: (chunk, _e, cb) => (logs.push(JSON.parse(String(chunk))), cb()) });
    const logger = pino({ level: "info" }, sink);
    h = await startHarness("pglite", { logger });
    socket = await onSocket(h, { logger });
  });
  afterAll(async () => {
    await socket?.close();
    await h?.close();
  });

  it.each([
    ["a Host header that is no host", "GET /health HTTP/1.1\r\nHost: a b"],
    ["a Host port past 65535", "GET /health HTTP/1.1\r\nHost: localhost:99999"],
    ["a backslash in the path", "GET /dashboard\\..\\index.html HTTP/1.1\r\nHost: localhost"],
    ["an asterisk target", "OPTIONS * HTTP/1.1\r\nHost: localhost"],
    ["a POST with a body and a bad Host", `POST /auth/otp/start HTTP/1.1\r\nHost: a b\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`],
  ])("%s is a 400 InvalidRequest in the error shape, with a request id, logged", async (_name, head) => {
    const answer = lastAnswer(await converse(socket.port, (s) => s.write(`${head.includes("\r\n\r\n") ? head.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n") : `${head}\r\nConnection: close\r\n\r\n`}`)));
    expect(answer.status).toBe(400);
    expect(answer.headers["content-type"]).toMatch(/^application\/json/);
    expect(answer.headers["cache-control"]).toBe("no-store");
    expect(answer.headers["x-content-type-options"]).toBe("nosniff");
    const requestId = answer.headers["x-request-id"];
    expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(JSON.parse(answer.body)).toMatchObject({ error: "InvalidRequest", message: expect.stringContaining("not valid") });
    expect(logs.find((l) => l.requestId === requestId)).toMatchObject({ msg: "request refused before the app", status: 400 });
  });

  it("a request the server can read is still the app's", async () => {
    const answer = lastAnswer(await converse(socket.port, (s) => s.write("GET /nowhere HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")));
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.body)).toMatchObject({ error: "NotFound" });
  });
});
