// What the Node HTTP server answers before a request reaches the app (docs/rest.md,
// "Conventions"): the app's own answers go through src/app.ts, these through Node's server events.
import { getRequestListener, RequestError } from "@hono/node-server";
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { ERRORS } from "../errors.ts";
import type { Logger } from "../log.ts";
import { BODY_LIMIT } from "./body.ts";
import { errorBody, maskedFault } from "./errors.ts";

/**
 * How long a client has to send a whole request, headers and body (Node's default is 300 s),
 * its headers (60 s), and how often Node looks for requests past them (every 30 s). A body is at
 * most 64 KiB, so a client still sending one after 30 s is stalling: each such connection held
 * a socket and its buffers for five minutes, and was let go up to 30 s after that.
 */
export type Deadlines = { requestMs: number; headersMs: number; checkEveryMs: number };
export const DEADLINES: Deadlines = { requestMs: 30_000, headersMs: 20_000, checkEveryMs: 5_000 };

/** The server's options for these deadlines: Node reads them only when the server is made. */
export function serverOptions(deadlines: Deadlines = DEADLINES): ServerOptions {
  return { requestTimeout: deadlines.requestMs, headersTimeout: deadlines.headersMs, connectionsCheckingInterval: deadlines.checkEveryMs };
}

/**
 * The app's HTTP server (src/main.ts), made with serverOptions, with the server's own answers
 * (answerBeforeTheApp), and not yet listening. Made here rather than by @hono/node-server's
 * `serve`, which takes no errorHandler for the requests it refuses itself (answerUnreadableRequest).
 */
export function createAppServer(fetch: (req: Request, env: unknown) => Promise<Response>, opts: { hostname?: string; logger: Logger; deadlines?: Deadlines }): Server {
  const deadlines = opts.deadlines ?? DEADLINES;
  const listener = getRequestListener(fetch, { hostname: opts.hostname, errorHandler: answerUnreadableRequest(opts.logger) });
  const server = createServer(serverOptions(deadlines), listener);
  answerBeforeTheApp(server, opts.logger, deadlines);
  return server;
}

/** The server's own answers, on a server made with serverOptions (src/main.ts). */
export function answerBeforeTheApp(server: Server, logger: Logger, deadlines: Deadlines = DEADLINES): void {
  server.on("checkContinue", (req: IncomingMessage, res: ServerResponse) => {
    continueIfWithinLimit(req, res);
    server.emit("request", req, res);
  });
  // Any other expectation is served as if it were not there (RFC 9110 10.1.1 lets a server
  // ignore it): Node's own answer to one was a bare 417 with no body and no request id, where
  // every answer is in the API's shape with an X-Request-Id (docs/rest.md, "Conventions").
  server.on("checkExpectation", (req: IncomingMessage, res: ServerResponse) => server.emit("request", req, res));
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => answerClientError(err, socket, logger, deadlines));
}

/**
 * A client may half-close its connection once its request is sent (docs/rest.md, "Conventions"),
 * and still reads the answer. Node's server ends its own side as soon as the client's ends,
 * unless `httpAllowHalfOpen` (a property, not a createServer option): the answer of a request
 * still being served then went to a closed socket, and the client had nothing, not even in a
 * drain, which waits for such requests. With it, Node closes the connection once that answer is
 * written, and at once when no request is in progress.
 */
export function answerHalfClosedClients(server: Server): void {
  (server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
}

/**
 * Once the server drains (`server.close()`), Node ends each connection right after the answer of
 * the request in flight on it, yet that answer still said `Connection: keep-alive`: a client
 * that sent its next request on the connection had it cut off, with nothing (33rd review: every
 * keep-alive client of a gateway being replaced in a roll-out). Answers given while draining say
 * `Connection: close`, so the client opens a new connection, to a gateway that serves it.
 * Returns what the drain calls first. Costs a Set entry per request in flight.
 */
export function closeConnectionsWhenDraining(server: Server): () => void {
  const inFlight = new Set<ServerResponse>();
  let draining = false;
  server.on("request", (_req: IncomingMessage, res: ServerResponse) => {
    if (draining) {
      res.setHeader("Connection", "close");
      return;
    }
    inFlight.add(res);
    res.once("close", () => inFlight.delete(res));
  });
  return () => {
    draining = true;
    for (const res of inFlight) if (!res.headersSent) res.setHeader("Connection", "close");
  };
}

/**
 * Stops accepting connections; resolves once every connection has ended. server.close() alone
 * also ends every idle keep-alive connection at once, and a request a client (a load balancer,
 * a connection pool) was sending on one at that moment was cut off with nothing. Here they stay:
 * each ends after its next answer, which says `Connection: close` (closeConnectionsWhenDraining),
 * or once idle for the keep-alive timeout the server announced (`Keep-Alive: timeout=5`), past
 * which clients no longer reuse it (docs/configuration.md, "Shutdown"). The shutdown deadline
 * bounds the rest.
 */
export function stopAccepting(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    server.closeIdleConnections = () => {};
    server.close(() => resolve());
  });
}

/**
 * `Expect: 100-continue` asks before sending the body. Node says yes to every such request
 * unless told otherwise, and a client then sent megabytes only to be answered 413: the app
 * refuses a declared length over the limit from its header (src/http/body.ts), so the body is
 * invited only when it may be read.
 */
function continueIfWithinLimit(req: IncomingMessage, res: ServerResponse): void {
  const declared = Number(req.headers["content-length"]);
  if (req.headers["transfer-encoding"] !== undefined || !(declared > BODY_LIMIT)) res.writeContinue();
}

/**
 * A request Node's parser refuses (two Content-Lengths, Content-Length beside Transfer-Encoding,
 * a malformed line, headers too large) or that outlives its deadline: answered in the API's
 * error shape with a request id, as every answer is, instead of Node's bare `400 Bad Request`.
 * The connection cannot carry another request, so it is closed.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex, logger: Logger, deadlines: Deadlines): void {
  // Nothing can be said on a connection that is gone, or whose answer has begun (Node's rule too).
  const answering = (socket as Duplex & { _httpMessage?: ServerResponse })._httpMessage;
  if (err.code === "ECONNRESET" || !socket.writable || answering?.headersSent) {
    socket.destroy();
    return;
  }
  const reason =
    err.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? `the request did not arrive within ${deadlines.requestMs / 1000} s`
      : err.code === "HPE_HEADER_OVERFLOW"
        ? "the request's headers are too large"
        : "the request is not valid HTTP/1.1 (its framing or a header line)";
  const body = JSON.stringify(errorBody("InvalidRequest", reason));
  const status = ERRORS.InvalidRequest.status;
  const requestId = randomUUID();
  logger.info({ requestId, status, code: err.code, reason }, "request refused before the app");
  socket.end(
    `HTTP/1.1 ${status} Bad Request\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * The errorHandler of createAppServer's listener. @hono/node-server refuses, before the app, a request it
 * cannot make a URL of: a Host header that is no host (`Host: a b`, a port over 65535), a
 * backslash in the path, `GET *`, an absolute target of another scheme. It answered a bare
 * `400` with no body and no request id, and logged nothing, where every refused request is
 * answered in the error shape with an `X-Request-Id` and logged (docs/rest.md, "Conventions").
 * Anything else reaching here is unexpected: the masked 500, logged.
 */
export function answerUnreadableRequest(logger: Logger): (err: unknown) => Response {
  return (err) => {
    const requestId = randomUUID();
    const refused = err instanceof RequestError;
    const status = refused ? ERRORS.InvalidRequest.status : 500;
    const body = refused
      ? errorBody("InvalidRequest", `the request's target or Host header is not valid (${err.message})`)
      : maskedFault();
    if (refused) logger.info({ requestId, status, reason: err.message }, "request refused before the app");
    else logger.error({ requestId, err }, "unexpected error");
    // any body it has is never read: the connection cannot carry another request
    return Response.json(body, { status, headers: { "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "X-Request-Id": requestId, Connection: "close" } });
  };
}
