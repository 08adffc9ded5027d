// The transports codes and notices go out by, against real receivers on loopback: an SMTP server
// (smtp-server) and HTTP servers standing for an SMS gateway (30th review).
import http from "node:http";
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../src/log.ts";
import { createMessenger } from "../src/messaging/transport.ts";
import { gatherNotices, maskIdentifier } from "../src/auth/notices.ts";
import { startMailbox } from "./support/mailbox.ts";

/** The GSM 03.38 basic character set, in which a text segment holds 160 characters (153 when concatenated). */
const GSM7_BASIC = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà";

const logger = createLogger("silent");
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (closers.length) await closers.pop()!();
});

async function httpServer(handler: http.RequestListener): Promise<{ url: string; hits: Array<{ path: string; headers: http.IncomingHttpHeaders; body: string }> }> {
  const hits: Array<{ path: string; headers: http.IncomingHttpHeaders; body: string }> = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      hits.push({ path: req.url ?? "", headers: req.headers, body });
      handler(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(() => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits };
}

describe("an SMTP relay that logs linkgate in", () => {
  /** A relay that asks for a password and offers no STARTTLS: what a man in the middle who strips the offer looks like. */
  async function relayWithoutTls() {
    const logins: string[] = [];
    const delivered: string[] = [];
    const relay = new SMTPServer({
      authOptional: false,
      allowInsecureAuth: true,
      disabledCommands: ["STARTTLS"],
      logger: false,
      onAuth(auth, _session, callback) {
        logins.push(`${auth.username}:${auth.password}`);
        callback(null, { user: auth.username });
      },
      onData(stream, session, callback) {
        stream.resume();
        stream.on("end", () => (delivered.push(...session.envelope.rcptTo.map((r) => r.address)), callback()));
      },
    });
    await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
    closers.push(() => new Promise<void>((resolve) => relay.close(() => resolve())));
    return { port: (relay.server.address() as AddressInfo).port, logins, delivered };
  }
  const code = { to: { kind: "email" as const, value: "ada@example.com" }, subject: "s", text: "Your code is 123456" };

  it("never sends its password, or a code, where TLS was not agreed", async () => {
    const relay = await relayWithoutTls();
    const messenger = createMessenger({ smtpUrl: `smtp://linkgate:Relay%20Pass@127.0.0.1:${relay.port}`, smtpFrom: "x@example.com", logger });
    try {
      await expect(messenger.send(code)).rejects.toThrow(/STARTTLS|TLS/i);
    } finally {
      messenger.close();
    }
    expect(relay.logins).toEqual([]);
    expect(relay.delivered).toEqual([]);
  });

  it("logs in without TLS only when the URL says requireTLS=false", async () => {
    const relay = await relayWithoutTls();
    const messenger = createMessenger({ smtpUrl: `smtp://linkgate:Relay%20Pass@127.0.0.1:${relay.port}?requireTLS=false`, smtpFrom: "x@example.com", logger });
    try {
      await messenger.send(code);
    } finally {
      messenger.close();
    }
    expect(relay.logins).toEqual(["linkgate:Relay Pass"]);
    expect(relay.delivered).toEqual(["ada@example.com"]);
  });
});

describe("the SMS webhook", () => {
  it("takes its user and password from the URL as HTTP Basic credentials (fetch refuses them in the URL), and never logs them", async () => {
    const gateway = await httpServer((_req, res) => res.writeHead(200).end());
    const lines: string[] = [];
    const url = new URL(gateway.url);
    url.username = "sms";
    url.password = "S3cret:Gateway Pass";
    const messenger = createMessenger({ smsWebhookUrl: `${url.href}send`, smtpFrom: "x@example.com", logger: createLogger("info", { write: (l: string) => void lines.push(l) }) });
    await messenger.send({ to: { kind: "phone", value: "+14155550143" }, subject: "s", text: "Your code is 123456" });
    expect(gateway.hits).toHaveLength(1);
    expect(gateway.hits[0].path).toBe("/send");
    expect(gateway.hits[0].headers.authorization).toBe(`Basic ${Buffer.from("sms:S3cret:Gateway Pass").toString("base64")}`);
    expect(JSON.parse(gateway.hits[0].body)).toEqual({ to: "+14155550143", body: "Your code is 123456" });
    expect(lines.join("")).not.toContain("S3cret");
  });

  // One character outside the GSM 7-bit alphabet sends a whole text as UCS-2, 70 characters a
  // segment instead of 160: the masks and the "…and N more changes" of notices made every
  // notice text cost twice its segments or more (docs/security.md, "Message budgets").
  it("texts linkgate's own masks, ellipses, quotes and dashes in the GSM 7-bit alphabet, the rest as written", async () => {
    const gateway = await httpServer((_req, res) => res.writeHead(200).end());
    const messenger = createMessenger({ smsWebhookUrl: `${gateway.url}/send`, smtpFrom: "x@example.com", logger });
    const notices = Array.from({ length: 40 }, (_, i) => ({
      subject: i % 2 ? "A passkey was removed" : "An e-mail address was added",
      text: `${i % 2 ? "A passkey was removed" : "An e-mail address was added"}\n${maskIdentifier({ kind: "email", value: `someone${i}@example.com` })} and ${maskIdentifier({ kind: "phone", value: "+14155550143" })} – “today”, it’s done\nIf it was not you: sign in and remove it.`,
    }));
    const gathered = gatherNotices(notices);
    expect(gathered.text).toMatch(/[•…]/); // what the notice says, before it is texted
    await messenger.send({ to: { kind: "phone", value: "+14155550143" }, subject: gathered.subject, text: gathered.text });
    const texted: string = JSON.parse(gateway.hits[0].body).body;
    expect([...texted].filter((c) => !GSM7_BASIC.includes(c))).toEqual([]);
    expect(texted).toContain("s***@example.com");
    expect(texted).toContain("...and");
    expect(Math.ceil(texted.length / 153)).toBeLessThanOrEqual(7);
    // a character of someone's own choosing outside GSM-7 is texted as it is
    await messenger.send({ to: { kind: "phone", value: "+14155550143" }, subject: "s", text: "Ünïcødé 名前 •" });
    expect(JSON.parse(gateway.hits[1].body).body).toBe("Ünïcødé 名前 *");
  });

  it("does not follow a redirect: the number and the text go nowhere else", async () => {
    const elsewhere = await httpServer((_req, res) => res.writeHead(200).end());
    const gateway = await httpServer((_req, res) => res.writeHead(307, { location: `${elsewhere.url}/steal` }).end());
    const messenger = createMessenger({ smsWebhookUrl: `${gateway.url}/send`, smtpFrom: "x@example.com", logger });
    await expect(messenger.send({ to: { kind: "phone", value: "+14155550143" }, subject: "s", text: "Your code is 123456" })).rejects.toThrow();
    expect(elsewhere.hits).toEqual([]);
  });
});

describe("SMTP", () => {
  it("a relay that takes a message and never acknowledges it fails the send within the socket's deadline, and is not sent it again", async () => {
    let received = 0;
    const smtp = new SMTPServer({
      authOptional: true,
      disabledCommands: ["STARTTLS"],
      logger: false,
      onData(stream) {
        // reads the whole message, then never answers
        stream.on("data", () => {});
        stream.on("end", () => void received++);
      },
    });
    await new Promise<void>((resolve) => smtp.listen(0, "127.0.0.1", resolve));
    closers.push(() => new Promise<void>((resolve) => smtp.close(() => resolve())));
    const port = (smtp.server.address() as AddressInfo).port;
    // a shorter silence than the default 15 s, by the URL's own query, which wins
    const messenger = createMessenger({ smtpUrl: `smtp://127.0.0.1:${port}?socketTimeout=500`, smtpFrom: "linkgate@example.com", logger });
    closers.push(async () => messenger.close());
    await expect(messenger.send({ to: { kind: "email", value: "ada@example.com" }, subject: "Your code", text: "Your code is 123456" })).rejects.toMatchObject({ code: "ETIMEDOUT" });
    expect(received).toBe(1);
  });

  it("a relay that holds every pooled connection holds the next code no longer than its deadline (sendTimeout), whatever the socket's", async () => {
    const mailbox = await startMailbox();
    closers.push(() => mailbox.close());
    // the socket's deadline counts silence on one connection; a relay slow on every message (or
    // an operator's long socketTimeout) kept each queued code waiting for as many of them as were
    // ahead of it in the queue
    const messenger = createMessenger({ smtpUrl: `${mailbox.smtpUrl}?socketTimeout=60000&sendTimeout=3000`, smtpFrom: "linkgate@example.com", logger });
    closers.push(async () => messenger.close());
    // five sessions (the pool's size) a tarpitting relay takes a message on and does not answer
    const slow = Array.from({ length: 5 }, (_, i) => `slow${i}@tarpit.example`);
    for (const to of slow) mailbox.hold(to);
    const held = Promise.allSettled(slow.map((to) => messenger.send({ to: { kind: "email", value: to }, subject: "Your code", text: "Your code is 123456" })));
    await mailbox.held(5);
    const [next] = await Promise.allSettled([messenger.send({ to: { kind: "email", value: "next@example.com" }, subject: "Your code", text: "Your code is 654321" })]);
    // sent once its turn came within its deadline, or failed at the deadline: never left waiting
    if (next.status === "rejected") expect(next.reason).toMatchObject({ code: "EABORT" });
    expect(mailbox.tries("next@example.com")).toBeLessThanOrEqual(1);
    // the held ones end at their own deadlines and are not sent again: the relay has them
    for (const r of await held) expect(r).toMatchObject({ status: "rejected", reason: { code: "EABORT" } });
    for (const to of slow) expect(mailbox.tries(to)).toBe(1);
  }, 20_000);
});
