// One attempt over HTTP, without a database.
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSender, type SendInput } from "../src/delivery/sender.ts";
import { verifyWebhook } from "../src/webhooks/receiver.ts";
import { generateWebhookSecret } from "../src/webhooks/secrets.ts";
import { closedPortUrl, TestReceiver } from "./support/receiver.ts";

const secret = generateWebhookSecret();
const body = JSON.stringify({ id: "evt_1", event_type: "user.created", created_at: "2026-11-21T10:00:00.123456789Z", project_id: "prj_1", data: { n: "é" } });
const input = (url: string, over: Partial<SendInput> = {}): SendInput => ({
  url,
  body,
  eventId: "evt_1",
  eventType: "user.created",
  attempt: 3,
  secrets: { current: secret },
  ...over,
});

describe("sender", () => {
  let r: TestReceiver;
  beforeAll(async () => {
    r = await TestReceiver.start();
  });
  afterAll(async () => {
    await r.close();
  });

  it("POSTs the exact bytes with the headers of docs/webhooks.md, and reports what it sent", async () => {
    const sender = createSender({ timeoutMs: 2_000, allowPrivate: true });
    const res = await sender.send(input(r.url));
    await sender.close();
    expect(res).toMatchObject({ statusCode: 200, error: null, responseExcerpt: "ok", retryAfter: null, reached: true });
    const got = r.receipts.at(-1)!;
    expect(got.body.toString("utf8")).toBe(body);
    expect(got.headers["x-service-delivery-attempt"]).toBe("3");
    expect(verifyWebhook(got.body, got.headers, secret).ok).toBe(true);
    for (const [k, v] of Object.entries(res.requestHeaders)) expect(got.headers[k.toLowerCase()], k).toBe(v);
  });

  it("connects to the addresses the target check vetted, not to what DNS says later", async () => {
    const port = new URL(r.url).port;
    const lookups: string[] = [];
    // The resolver the guard consults; the Agent must reuse its answer (no second resolution,
    // so a rebinding DNS server gets no chance to hand out another address).
    const sender = createSender({
      timeoutMs: 2_000,
      allowPrivate: true,
      lookup: async (host) => {
        lookups.push(host);
        return [{ address: "127.0.0.1", family: 4 }];
      },
    });
    // `hooks.invalid` resolves nowhere: reaching the receiver proves the pinned address was used.
    const res = await sender.send(input(`http://hooks.invalid:${port}/hook`));
    await sender.close();
    expect(res).toMatchObject({ statusCode: 200, error: null });
    expect(lookups).toEqual(["hooks.invalid"]);
    expect(r.receipts.at(-1)!.headers.host).toBe(`hooks.invalid:${port}`);
  });

  it("refuses a private target when private targets are not allowed, without sending", async () => {
    const before = r.receipts.length;
    const sender = createSender({ timeoutMs: 2_000, allowPrivate: false });
    const res = await sender.send(input(r.url.replace("http:", "https:")));
    await sender.close();
    expect(res.statusCode).toBeNull();
    expect(res.error).toMatch(/^target refused: webhook host is a loopback address/);
    expect(res.requestHeaders).toEqual({});
    expect(res.reached).toBe(false);
    expect(r.receipts.length).toBe(before);
  });

  it("keeps only the first KiB of a large answer and gives up at the timeout", async () => {
    const sender = createSender({ timeoutMs: 300, allowPrivate: true });
    r.enqueue({ status: 500, body: Buffer.alloc(100_000, "x") });
    const big = await sender.send(input(r.url));
    expect(big).toMatchObject({ statusCode: 500, error: "HTTP 500" });
    expect(big.responseExcerpt).toBe("x".repeat(1024));

    r.enqueue({ status: 200, delayMs: 2_000 });
    const slow = await sender.send(input(r.url));
    // A timeout reached the receiver: it says something about the endpoint (breaker.ts).
    expect(slow).toMatchObject({ statusCode: null, error: "timeout: no response within 300 ms", reached: true });
    expect(slow.durationMs).toBeGreaterThanOrEqual(290);
    expect(slow.durationMs).toBeLessThan(1_500);

    // The pool still works afterwards.
    expect((await sender.send(input(r.url))).statusCode).toBe(200);
    await sender.close();
  });

  it("a status whose body does not finish within the timeout is no answer: a failed attempt, not a delivery", async () => {
    // A receiver that answers 200 at once, then drips its body a byte at a time and never ends it.
    const drips = new Set<NodeJS.Timeout>();
    const dripping = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "text/plain" });
      const t = setInterval(() => res.write("a"), 50);
      drips.add(t);
      res.on("close", () => (clearInterval(t), drips.delete(t)));
    });
    await new Promise<void>((resolve) => dripping.listen(0, "127.0.0.1", resolve));
    const sender = createSender({ timeoutMs: 300, allowPrivate: true });
    try {
      const res = await sender.send(input(`http://127.0.0.1:${(dripping.address() as AddressInfo).port}/hook`));
      expect(res).toMatchObject({ statusCode: null, error: "timeout: HTTP 200 arrived, its body did not finish within 300 ms", reached: true });
      expect(res.responseExcerpt).toMatch(/^a+$/);
    } finally {
      await sender.close();
      for (const t of drips) clearInterval(t);
      dripping.closeAllConnections();
      await new Promise<void>((resolve) => dripping.close(() => resolve()));
    }
  });

  // fifteenth review: a 200 whose body broke off (invalid chunks, the receiver crashing mid-answer)
  // counted as delivered, and the event may never have been kept
  it("a status whose body breaks off is no answer either: a failed attempt, not a delivery", async () => {
    let answer = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n";
    const broken = net.createServer((socket) => {
      socket.once("data", () => socket.end(answer));
    });
    await new Promise<void>((resolve) => broken.listen(0, "127.0.0.1", resolve));
    const sender = createSender({ timeoutMs: 5_000, allowPrivate: true });
    try {
      const res = await sender.send(input(`http://127.0.0.1:${(broken.address() as AddressInfo).port}/hook`));
      expect(res).toMatchObject({ statusCode: null, reached: true, error: expect.stringMatching(/^connection broke: HTTP 200 arrived, its body did not finish/) });
      // any other status says what it says, whole or not: a 410 is gone, a 429 keeps its Retry-After
      answer = "HTTP/1.1 429 Too Many Requests\r\nretry-after: 120\r\ncontent-length: 10\r\n\r\nab";
      expect(await sender.send(input(`http://127.0.0.1:${(broken.address() as AddressInfo).port}/hook`))).toMatchObject({ statusCode: 429, retryAfter: "120" });
    } finally {
      await sender.close();
      await new Promise<void>((resolve) => broken.close(() => resolve()));
    }
  });

  // RFC 9110 §15.2: a client must take 1xx answers it did not ask for. Some servers send
  // `100 Continue` before every answer to a POST; undici took it for a broken connection, and a
  // receiver that then answered 200 saw every attempt fail as "connection reset before a response".
  it("an interim 100 Continue before the answer is skipped: the final status decides, over a reused connection too", async () => {
    const answers = [
      ["HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nkept"],
      // in pieces, with two interim answers, one with a header
      ["HTTP/1.1 1", "00 Continue\r\nx-a: b\r", "\n\r\nHTTP/1.1 100 Continue\r\n\r\n", "HTTP/1.1 500 Oops\r\ncontent-length: 2\r\n\r\nno"],
      ["HTTP/1.1 100 Continue\r\n\r\n", "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n"],
      // not an interim answer: a 200 whose body starts like one is the body
      ["HTTP/1.1 200 OK\r\ncontent-length: 25\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n"],
    ];
    let next = 0;
    let connections = 0;
    const server = net.createServer((socket) => {
      connections++;
      let pending = "";
      socket.on("data", (d) => {
        pending += d.toString("latin1");
        const end = pending.indexOf("\r\n\r\n");
        const length = Number(/content-length: (\d+)/i.exec(pending)?.[1] ?? 0);
        if (end < 0 || pending.length < end + 4 + length) return;
        pending = "";
        const parts = answers[next++];
        parts.forEach((p, i) => setTimeout(() => socket.write(p), 15 * i));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    const sender = createSender({ timeoutMs: 2_000, allowPrivate: true });
    try {
      expect(await sender.send(input(url))).toMatchObject({ statusCode: 200, error: null, responseExcerpt: "kept" });
      expect(await sender.send(input(url))).toMatchObject({ statusCode: 500, error: "HTTP 500", responseExcerpt: "no" });
      expect(await sender.send(input(url))).toMatchObject({ statusCode: 202, error: null });
      expect(await sender.send(input(url))).toMatchObject({ statusCode: 200, error: null, responseExcerpt: "HTTP/1.1 100 Continue\r\n\r\n" });
      expect(connections).toBeLessThan(answers.length); // the later answers came over a connection used before
    } finally {
      await sender.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it("a refused connection reached the network; a host that does not resolve did not", async () => {
    const sender = createSender({
      timeoutMs: 2_000,
      allowPrivate: true,
      lookup: async () => {
        throw Object.assign(new Error("no such host"), { code: "ENOTFOUND" });
      },
    });
    const refused = await sender.send(input(await closedPortUrl()));
    const unresolved = await sender.send(input("http://hooks.invalid/hook"));
    await sender.close();
    expect(refused).toMatchObject({ statusCode: null, reached: true });
    expect(refused.error).toMatch(/ECONNREFUSED/);
    expect(unresolved).toMatchObject({ statusCode: null, reached: false, requestHeaders: {} });
    expect(unresolved.error).toBe("target refused: webhook host hooks.invalid could not be resolved (ENOTFOUND)");
  });

  it("reports Retry-After and a redirect without following it", async () => {
    const sender = createSender({ timeoutMs: 2_000, allowPrivate: true });
    r.enqueue({ status: 429, headers: { "retry-after": "7" } }, { status: 307, headers: { location: "https://example.com/x" } });
    const limited = await sender.send(input(r.url));
    const moved = await sender.send(input(r.url));
    await sender.close();
    expect(limited).toMatchObject({ statusCode: 429, retryAfter: "7", error: "HTTP 429" });
    expect(moved).toMatchObject({ statusCode: 307, error: "HTTP 307: redirect not followed (to https://example.com/x); redirects are never followed: set the webhook's URL to the address the endpoint moved to" });
  });
});
