// Every response carries X-Request-Id (docs/rest.md): the caller's own (its first 64
// characters) or a new one, whoever made the response: a REST route, GraphQL, the OpenID Connect
// provider, a refusal before any route, an unknown path. Checked in process and over a real
// socket, where @hono/node-server writes the headers of the response it was handed. And every
// response says `X-Content-Type-Options: nosniff`, which the same middleware sets.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../src/log.ts";
import { onSocket, startHarness, type Harness, type Socket } from "./support/app.ts";
import { converse, lastAnswer } from "./support/raw-http.ts";
import { harnessOnSocket } from "./support/socket.ts";
import { backends } from "./support/db.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe.each(backends)("X-Request-Id on %s", (backend) => {
  const served = harnessOnSocket(backend);

  const json = { "content-type": "application/json" };
  const REQUESTS: Array<{ name: string; method: string; path: string; headers?: Record<string, string>; body?: string; status: number }> = [
    { name: "a REST route", method: "POST", path: "/auth/otp/start", headers: json, body: JSON.stringify({ email: "request-id@example.com" }), status: 200 },
    { name: "a REST refusal", method: "POST", path: "/auth/otp/start", headers: json, body: "{", status: 400 },
    { name: "GraphQL", method: "POST", path: "/graphql", headers: json, body: JSON.stringify({ query: "{ __typename }" }), status: 200 },
    { name: "a body over the limit", method: "POST", path: "/graphql", headers: json, body: "x".repeat(70_000), status: 413 },
    { name: "OpenID Connect discovery", method: "GET", path: "/.well-known/openid-configuration", status: 200 },
    { name: "the provider's own refusal", method: "POST", path: "/oauth/token", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "grant_type=nonsense", status: 400 },
    { name: "an unknown path", method: "GET", path: "/no/such/route", status: 404 },
  ];

  it.each(REQUESTS)("$name: in process, a new id, or the caller's own", async ({ method, path, headers, body, status }) => {
    const fresh = await served.h.app.fetch(new Request(`http://linkgate.test${path}`, { method, headers: { "x-api-key": served.h.apiKey, ...headers }, body }));
    expect(fresh.status).toBe(status);
    expect(fresh.headers.get("x-request-id")).toMatch(UUID);
    const own = await served.h.app.fetch(new Request(`http://linkgate.test${path}`, { method, headers: { "x-api-key": served.h.apiKey, "x-request-id": "caller-1", ...headers }, body }));
    expect(own.headers.get("x-request-id")).toBe("caller-1");
  });

  it.each(REQUESTS)("$name: over a socket, a new id, or the caller's own cut to 64 characters", async ({ method, path, headers, body, status }) => {
    const fresh = await fetch(served.socket.origin + path, { method, headers: { "x-api-key": served.h.apiKey, ...headers }, body });
    await fresh.arrayBuffer();
    expect(fresh.status).toBe(status);
    expect(fresh.headers.get("x-request-id")).toMatch(UUID);
    expect(fresh.headers.get("x-content-type-options")).toBe("nosniff");
    const own = await fetch(served.socket.origin + path, { method, headers: { "x-api-key": served.h.apiKey, "x-request-id": "c".repeat(80), ...headers }, body });
    await own.arrayBuffer();
    expect(own.headers.get("x-request-id")).toBe("c".repeat(64));
  });
});

// Every line written while a request is served carries its id (docs/security.md, "Logs"),
// whoever writes it: here graphql-yoga, logging the fault it masked with the server's logger.
describe.each(backends)("log lines of a request on %s", (backend) => {
  const raw: string[] = [];
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend, { logger: createLogger("info", { write: (line: string) => void raw.push(line) }) });
  });
  afterAll(() => h?.close());

  it("a fault GraphQL masks is logged with the request id its answer carries", async () => {
    // a real fault, not a stub: the table the query reads is gone (a schema that drifted)
    await h.db.prisma.$executeRawUnsafe(`ALTER TABLE "webhooks" RENAME TO "webhooks_moved"`);
    let res: Response;
    try {
      res = await h.app.fetch(
        new Request("http://linkgate.test/graphql", {
          method: "POST",
          headers: { "content-type": "application/json", "x-api-key": h.apiKey },
          body: JSON.stringify({ query: "{ webhooks { edges { node { id } } } }" }),
        }),
      );
    } finally {
      await h.db.prisma.$executeRawUnsafe(`ALTER TABLE "webhooks_moved" RENAME TO "webhooks"`);
    }
    const body = await res.json();
    expect(body.errors).toEqual([expect.objectContaining({ message: "Unexpected error." })]);
    const requestId = res.headers.get("x-request-id");
    expect(requestId).toMatch(UUID);

    const mine = raw.filter((l) => l.includes(requestId!)).map((l) => JSON.parse(l));
    expect(mine).toContainEqual(expect.objectContaining({ msg: "graphql", err: expect.objectContaining({ message: expect.stringMatching(/webhooks/) }) }));
    expect(mine).toContainEqual(expect.objectContaining({ msg: "request", path: "/graphql", status: 200 }));
    expect(mine.every((l) => l.requestId === requestId)).toBe(true);
    // once a line: not written twice into one by two loggers
    for (const line of raw.filter((l) => l.includes(requestId!))) expect(line.split('"requestId"')).toHaveLength(2);
  });
});

// Node hands a header's bytes 0x80 to 0xFF to the app as Latin-1 characters. A caller's
// X-Request-Id with one was echoed back byte for byte, and written into every log line of its
// request, C1 controls included (U+0085 breaks a line for some log readers, U+009B starts a
// terminal's escape sequence). Such an id is replaced by a new one (docs/rest.md, "Conventions").
describe.each(backends)("a caller's X-Request-Id that is not printable ASCII, on %s", (backend) => {
  const raw: string[] = [];
  let h: Harness;
  let socket: Socket;
  beforeAll(async () => {
    h = await startHarness(backend, { logger: createLogger("info", { write: (line: string) => void raw.push(line) }) });
    socket = await onSocket(h);
  });
  afterAll(async () => {
    await socket?.close();
    await h?.close();
  });

  /** The answer's X-Request-Id (as its bytes, read as Latin-1) and the log lines of the request. */
  async function send(id: string): Promise<{ answered: string; written: string; lines: Array<Record<string, unknown>> }> {
    const head = `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-Id: ${id}\r\nConnection: close\r\n\r\n`;
    const before = raw.length;
    const answer = lastAnswer(await converse(socket.port, (s) => s.write(Buffer.from(head, "latin1"))));
    expect(answer.status).toBe(200);
    const written = raw.slice(before);
    return { answered: answer.headers["x-request-id"]!, written: written.join(""), lines: written.map((l) => JSON.parse(l)) };
  }

  it.each([
    ["a Latin-1 letter (0xE9)", "caf\u00e9-1"],
    ["NEL (0x85), a line break to some log readers", "a\u0085{\"level\":60,\"msg\":\"forged\"}"],
    ["CSI (0x9B), a terminal's escape", "b\u009b31m"],
    ["a tab", "c\td"],
  ])("%s: a new id is answered and logged, not the caller's bytes", async (_name, id) => {
    const { answered, written, lines } = await send(id);
    expect(answered).toMatch(UUID);
    expect(lines).toContainEqual(expect.objectContaining({ msg: "request", path: "/healthz", requestId: answered }));
    expect(written).not.toMatch(/[\u0080-\u00ff]/);
    expect(written).not.toContain("forged");
  });

  it("printable ASCII, quotes and backslashes included, is kept, answered as sent and logged as one value", async () => {
    const id = `req "1" \\ {x}`;
    const { answered, lines } = await send(id);
    expect(answered).toBe(id);
    expect(lines).toContainEqual(expect.objectContaining({ msg: "request", requestId: id }));
  });
});
