// What the delivery log says about real, misconfigured HTTPS endpoints (docs/webhooks.md, "What
// the log says"): TLS servers on loopback with certificates from a private CA made here, trusted
// by the sender the way an operator trusts one, with NODE_EXTRA_CA_CERTS in the sending
// process's environment. Node reads it only at a process's start, so the sender runs in a
// process of its own (support/sender-process.ts).
import { spawn } from "node:child_process";
import http from "node:http";
import http2 from "node:http2";
import https from "node:https";
import net, { type AddressInfo } from "node:net";
import path from "node:path";
import zlib from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SendResult } from "../src/delivery/sender.ts";
import { CreateWebhookDocument, SendTestWebhookDocument, WebhookDeliveriesDocument } from "./generated/operations.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { serverUrl } from "./support/db.ts";
import { eventually } from "./support/receiver.ts";
import { startSecondProcess, type SecondProcess } from "./support/second-process.ts";
import { makePki, type Pki } from "./support/tls-pki.ts";

type Server = net.Server & { closeAllConnections?: () => void };
const servers: Server[] = [];
/** Requests that reached each server's HTTP layer (a refused handshake never does). */
const hits = new Map<Server, number>();

async function listen(server: Server, host = "127.0.0.1"): Promise<number> {
  await new Promise<void>((resolve, reject) => server.once("error", reject).listen(0, host, () => resolve()));
  servers.push(server);
  return (server.address() as AddressInfo).port;
}

function answering(status: number, headers: Record<string, string> = {}, body: string | Buffer = "ok") {
  return function (this: Server, req: http.IncomingMessage, res: http.ServerResponse) {
    hits.set(this, (hits.get(this) ?? 0) + 1);
    req.resume();
    req.on("end", () => res.writeHead(status, headers).end(body));
  };
}

async function ipv6Loopback(): Promise<boolean> {
  const probe = net.createServer();
  try {
    await new Promise<void>((resolve, reject) => probe.once("error", reject).listen(0, "::1", () => resolve()));
    return true;
  } catch {
    return false;
  } finally {
    probe.close();
  }
}
const hasIpv6 = await ipv6Loopback();

/** Sends one attempt to each URL from a process that trusts `pki`'s root, as production would. */
async function sendAll(pki: Pki, urls: (string | { url: string; bodyBytes: number })[]): Promise<SendResult[]> {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(import.meta.dirname, "support/sender-process.ts")], {
    env: { PATH: process.env.PATH, NODE_EXTRA_CA_CERTS: pki.caFile },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (c) => (out += c));
  child.stderr.on("data", (c) => (err += c));
  child.stdin.end(JSON.stringify({ timeoutMs: 10_000, hosts: { "hooks.example": "127.0.0.1" }, urls }));
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  if (code !== 0) throw new Error(`the sender's process failed (${code}): ${err}`);
  return JSON.parse(out) as SendResult[];
}

describe("the delivery log for misconfigured HTTPS endpoints", () => {
  let pki: Pki;
  const at: Record<string, SendResult> = {};
  const server: Record<string, Server> = {};
  let moved: Server;

  beforeAll(async () => {
    pki = makePki();
    const names = ["hooks.example", "127.0.0.1", "::1"];
    const good = pki.leaf(names);
    const chain = good.cert + pki.intermediate;
    const day = 86_400_000;
    const expiredOn = new Date(Math.floor(Date.now() / 1000) * 1000 - 2 * day);
    const expired = pki.leaf(names, { from: new Date(expiredOn.getTime() - 30 * day), to: expiredOn });
    const other = pki.leaf(["other.example"]);
    const self = pki.selfSigned(names);
    const tls = (key: string, cert: string, handler = answering(200), extra: https.ServerOptions = {}) => https.createServer({ key, cert, ...extra }, handler);
    const urlOf = (port: number) => `https://hooks.example:${port}/hook`;

    moved = tls(good.key, chain);
    const movedTo = `https://hooks.example:${await listen(moved)}/new`;
    server.good = tls(good.key, chain);
    server.expired = tls(expired.key, expired.cert + pki.intermediate);
    server.otherName = tls(other.key, other.cert + pki.intermediate);
    server.selfSigned = tls(self.key, self.cert);
    server.noIntermediate = tls(good.key, good.cert);
    server.tls11 = tls(good.key, chain, answering(200), { minVersion: "TLSv1", maxVersion: "TLSv1.1", ciphers: "DEFAULT@SECLEVEL=0" });
    server.redirect = tls(good.key, chain, answering(301, { location: movedTo }, ""));
    const page = `<!DOCTYPE html><html><head><title>401 Authorization Required</title></head><body>${"<p>Sign in to continue.</p>".repeat(300)}</body></html>`;
    server.unauthorized = tls(good.key, chain, answering(401, { "content-type": "text/html" }, page));
    server.forbidden = tls(good.key, chain, answering(403, { "content-type": "text/html" }, page));
    server.tooLarge = tls(good.key, chain, answering(413, { "content-type": "text/html" }, "<html><body><h1>413 Request Entity Too Large</h1></body></html>"));
    server.gzip = tls(good.key, chain, answering(200, { "content-type": "application/json", "content-encoding": "gzip" }, zlib.gzipSync(JSON.stringify({ received: true, by: "café" }))));
    // Answers at once, before the body has arrived, and closes: the receiver said 200.
    server.early = tls(good.key, chain, function (this: Server, req, res) {
      hits.set(this, (hits.get(this) ?? 0) + 1);
      res.writeHead(200, { connection: "close" }).end("ok");
      res.on("finish", () => req.socket.destroy());
    });
    const h2 = http2.createSecureServer({ key: good.key, cert: chain, allowHTTP1: false }, (_req, res) => res.writeHead(200).end("ok"));
    server.h2only = h2 as unknown as Server;
    // Drops the connection as the client's hello arrives.
    server.reset = net.createServer((socket) => socket.once("data", () => socket.resetAndDestroy()));
    server.plainHttp = http.createServer(answering(200));

    const urls: Record<string, string | { url: string; bodyBytes: number }> = {};
    for (const [name, s] of Object.entries(server)) urls[name] = urlOf(await listen(s));
    // a large event, well within what loopback buffers while the receiver answers (at 5 MB the
    // reset of the unread rest races the answer: the attempt fails as "connection reset")
    urls.early = { url: urls.early as string, bodyBytes: 100_000 };
    if (hasIpv6) {
      server.ipv6 = tls(good.key, chain);
      urls.ipv6 = `https://[::1]:${await listen(server.ipv6, "::1")}/hook`;
    }
    const results = await sendAll(pki, Object.values(urls));
    Object.keys(urls).forEach((name, i) => (at[name] = results[i]!));
    at.expiredOn = { error: expiredOn.toISOString().replace(/\.\d{3}Z$/, "Z") } as SendResult;
  });

  afterAll(async () => {
    for (const s of servers) {
      // the sending process has exited: its connections are closed
      s.closeAllConnections?.();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
    pki?.remove();
  });

  it("a certificate from the operator's private CA, with its intermediate, is trusted", () => {
    expect(at.good).toMatchObject({ statusCode: 200, error: null, responseExcerpt: "ok" });
  });

  it("says which certificate was refused, and why, in words; nothing is sent over it", () => {
    const refused = (name: string) => {
      expect(at[name], name).toMatchObject({ statusCode: null, reached: true, responseExcerpt: null });
      expect(hits.get(server[name]!) ?? 0, name).toBe(0);
      return at[name]!.error;
    };
    expect(refused("expired")).toBe(
      `TLS: the server's certificate (hooks.example, 127.0.0.1, ::1) expired on ${at.expiredOn!.error}: renew it (CERT_HAS_EXPIRED)`,
    );
    expect(refused("otherName")).toBe("TLS: the server's certificate is for other.example, not hooks.example (ERR_TLS_CERT_ALTNAME_INVALID)");
    expect(refused("selfSigned")).toMatch(/^TLS: the server's certificate \(hooks\.example, .*\) is self-signed: use one issued by a public certificate authority \(DEPTH_ZERO_SELF_SIGNED_CERT\)$/);
    expect(refused("noIntermediate")).toMatch(
      /^TLS: the server sent its certificate \(hooks\.example, .*\) without the intermediate certificate of its issuer "linkgate test intermediate", or that issuer is not trusted: configure the server with the full chain \(UNABLE_TO_VERIFY_LEAF_SIGNATURE\)$/,
    );
  });

  it("says when the server does not speak what deliveries need: HTTP/1.1, TLS 1.2 or later, TLS at all", () => {
    expect(at.h2only).toMatchObject({ statusCode: null, reached: true });
    expect(at.h2only!.error).toBe(
      "TLS: the server refused HTTP/1.1 in the TLS handshake (ALPN), as a server that offers only HTTP/2 does: deliveries are sent over HTTP/1.1 (ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL)",
    );
    expect(at.tls11!.error).toBe("TLS: the server offers only TLS versions older than 1.2, which deliveries do not use: enable TLS 1.2 or 1.3 on it (ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION)");
    expect(at.plainHttp!.error).toBe("TLS: the server did not answer in TLS (plain HTTP on this port?) (ERR_SSL_WRONG_VERSION_NUMBER)");
    expect(at.reset).toMatchObject({ statusCode: null, reached: true, error: "TLS: the server reset the connection during the TLS handshake, before any request was sent (ECONNRESET)" });
    for (const name of ["tls11", "plainHttp"]) expect(hits.get(server[name]!) ?? 0, name).toBe(0);
  });

  it("a redirect is not followed, and the log says what to change", () => {
    expect(at.redirect).toMatchObject({ statusCode: 301, reached: true });
    expect(at.redirect!.error).toMatch(
      /^HTTP 301: redirect not followed \(to https:\/\/hooks\.example:\d+\/new\); redirects are never followed: set the webhook's URL to the address the endpoint moved to$/,
    );
    expect(hits.get(moved) ?? 0).toBe(0);
  });

  it("a refusal by the receiver or a proxy in front of it is explained, with a bounded excerpt of its page", () => {
    for (const [name, status] of [["unauthorized", 401], ["forbidden", 403]] as const) {
      expect(at[name], name).toMatchObject({ statusCode: status, reached: true });
      expect(at[name]!.error).toBe(
        `HTTP ${status}: the receiver, or something in front of it, refused the request: it should let deliveries through and check their signature with the webhook's current secret instead of asking for credentials`,
      );
      expect(at[name]!.responseExcerpt).toMatch(/^<!DOCTYPE html><html><head><title>401 Authorization Required/);
      expect(Buffer.byteLength(at[name]!.responseExcerpt!)).toBe(1024);
    }
    expect(at.tooLarge).toMatchObject({ statusCode: 413, responseExcerpt: "<html><body><h1>413 Request Entity Too Large</h1></body></html>" });
    expect(at.tooLarge!.error).toMatch(/^HTTP 413: the receiver refused the body as too large \(\d+ bytes\): raise its limit$/);
  });

  it("a compressed answer is shown decoded, not as its compressed bytes", () => {
    expect(at.gzip).toMatchObject({ statusCode: 200, error: null, responseExcerpt: '{"received":true,"by":"café"}' });
  });

  it("a 200 sent before the body was read is the receiver's answer: delivered", () => {
    expect(at.early).toMatchObject({ statusCode: 200, error: null, responseExcerpt: "ok" });
    expect(hits.get(server.early!)).toBe(1);
  });

  it.skipIf(!hasIpv6)("an endpoint on IPv6 loopback ([::1]) is reached, its certificate checked against ::1", () => {
    expect(at.ipv6).toMatchObject({ statusCode: 200, error: null, responseExcerpt: "ok" });
  });
});

// The same, end to end: the worker of `npm start` (a process of its own, so on Postgres) with
// NODE_EXTRA_CA_CERTS, and the text the project reads in its delivery log over GraphQL.
describe.skipIf(!serverUrl)("a worker that trusts a private CA, and the delivery log over GraphQL", () => {
  let h: Harness;
  let pki: Pki;
  let worker: SecondProcess;
  const local: Server[] = [];
  let expiredOn: string;

  beforeAll(async () => {
    h = await startHarness("postgres");
    pki = makePki();
    const day = 86_400_000;
    const good = pki.leaf(["127.0.0.1"]);
    const to = new Date(Math.floor(Date.now() / 1000) * 1000 - day);
    expiredOn = to.toISOString().replace(/\.\d{3}Z$/, "Z");
    const expired = pki.leaf(["127.0.0.1"], { from: new Date(to.getTime() - 30 * day), to });
    for (const { key, cert } of [good, expired]) local.push(https.createServer({ key, cert: cert + pki.intermediate }, answering(200)));
    for (const s of local) await listen(s);
    worker = await startSecondProcess(h, { LINKGATE_WORKER: "1", LINKGATE_WEBHOOK_ALLOW_PRIVATE: "1", NODE_EXTRA_CA_CERTS: pki.caFile });
  });
  afterAll(async () => {
    await worker?.close();
    for (const s of local) {
      s.closeAllConnections?.();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
    await h?.close();
    pki?.remove();
  });

  const attemptOf = async (url: string) => {
    const created = await h.op(CreateWebhookDocument, { input: { url, events: ["user.created"] } });
    if (created.createWebhook.__typename !== "CreateWebhookPayload") throw new Error(created.createWebhook.__typename);
    const id = created.createWebhook.webhook.id;
    const sent = await h.op(SendTestWebhookDocument, { webhookId: id, eventType: "user.created" });
    if (sent.sendTestWebhook.__typename !== "SendTestWebhookPayload") throw new Error(sent.sendTestWebhook.__typename);
    return eventually(async () => {
      const log = await h.op(WebhookDeliveriesDocument, { id });
      return log.webhook?.deliveries.edges[0]?.node.attemptLog[0];
    }, 15_000, "the first attempt to be logged");
  };

  it("delivers to the CA's certificate, and says when the other one expired", async () => {
    const [good, expired] = local.map((s) => `https://127.0.0.1:${(s.address() as AddressInfo).port}/hook`);
    expect(await attemptOf(good!)).toMatchObject({ statusCode: 200, error: null });
    expect(await attemptOf(expired!)).toMatchObject({
      statusCode: null,
      error: `TLS: the server's certificate (127.0.0.1) expired on ${expiredOn}: renew it (CERT_HAS_EXPIRED)`,
    });
    expect(hits.get(local[1]!) ?? 0).toBe(0);
  });
});
