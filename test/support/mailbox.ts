// Real OTP transports on loopback: an SMTP server (smtp-server) for e-mail and an HTTP
// endpoint standing in for the SMS webhook. Tests read the codes the app really sent.
import { EventEmitter, once } from "node:events";
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { domainToASCII } from "node:url";
import { SMTPServer } from "smtp-server";

export type Received = { to: string; subject?: string; text: string };

export type Mailbox = {
  smtpUrl: string;
  smsUrl: string;
  messages: Received[];
  /** the newest six-digit code sent to this address or number */
  otp(to: string, timeoutMs?: number): Promise<string>;
  /**
   * From now on, refuse messages to `to`: the SMS endpoint answers `status`, the SMTP server
   * answers RCPT TO with it (a 5xx refuses the address for good, a 4xx for now), with `reply`
   * as its text (a relay's "5.7.1 Relay access denied").
   */
  refuse(to: string, status: number, reply?: string): void;
  /** From now on, the SMTP server answers every MAIL FROM with `status` and `reply`; null takes senders again. */
  refuseSender(refusal: { status: number; reply: string } | null): void;
  /**
   * The next message to `to` is taken whole (and kept in `messages`), then the connection is
   * dropped before the server's 250: a relay that crashed or restarted after queueing it.
   */
  dropAfterData(to: string): void;
  /** From now on, messages to `to` are taken whole and never answered, until the connection ends. */
  hold(to: string): void;
  /** Resolves once `count` messages in all have been held unanswered. */
  held(count: number): Promise<void>;
  /**
   * Ends every SMTP connection as a server's idle timeout does (FIN, no reply), and resolves once
   * they are closed. For use while nothing is being sent.
   */
  dropIdleConnections(): Promise<void>;
  /** MAIL FROM commands the SMTP server was sent so far, refused or not. */
  senders(): number;
  /** SMTP connections accepted so far. */
  connections(): number;
  /** Takes messages to `to` again. */
  accept(to: string): void;
  /** How many times a message to `to` reached a transport, refused or not. */
  tries(to: string): number;
  close(): Promise<void>;
};

/**
 * The address as it went over the wire, in lower case: smtp-server hands the envelope's
 * punycode domains over decoded (xn--bcher-kva.example as bücher.example), and linkgate
 * sends to the ASCII form (docs/authentication.md, "How identifiers are spelled").
 */
const wireAddress = (address: string) => {
  const at = address.lastIndexOf("@");
  if (at < 0) return address.toLowerCase();
  return `${address.slice(0, at)}@${domainToASCII(address.slice(at + 1)) || address.slice(at + 1)}`.toLowerCase();
};

export async function startMailbox(): Promise<Mailbox> {
  const messages: Received[] = [];
  const refusals = new Map<string, number>();
  const tried = new Map<string, number>();
  const knock = (to: string) => {
    tried.set(to, (tried.get(to) ?? 0) + 1);
    return refusals.get(to);
  };
  const replies = new Map<string, string>();
  let senderRefusal: { status: number; reply: string } | null = null;
  const drops = new Set<string>();
  const holds = new Set<string>();
  const events = new EventEmitter();
  let heldCount = 0;
  // smtp-server keeps its sockets to itself; a session names its client's port
  const sockets = new Map<number, Socket>();
  let accepted = 0;
  let mailFroms = 0;
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    logger: false,
    onMailFrom(_address, _session, callback) {
      mailFroms++;
      if (!senderRefusal) return callback();
      callback(Object.assign(new Error(senderRefusal.reply), { responseCode: senderRefusal.status }));
    },
    onRcptTo(address, _session, callback) {
      const to = wireAddress(address.address);
      const status = knock(to);
      if (status === undefined) return callback();
      callback(Object.assign(new Error(replies.get(to) ?? "mailbox unavailable"), { responseCode: status }));
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8");
        // A long header is folded over several lines (RFC 5322 §2.2.3); unfold the header block
        // (removing each CRLF before whitespace) before reading the subject, or a gathered
        // notice's subject reads cut short.
        const headers = raw.split(/\r?\n\r?\n/, 1)[0].replace(/\r?\n(?=[ \t])/g, "");
        const subject = /^Subject: (.*)$/m.exec(headers)?.[1];
        const rcpts = session.envelope.rcptTo.map((rcpt) => wireAddress(rcpt.address));
        for (const to of rcpts) messages.push({ to, subject, text: raw });
        const dropped = rcpts.find((to) => drops.has(to));
        if (dropped) {
          drops.delete(dropped);
          sockets.get(session.remotePort)?.destroy();
          return;
        }
        if (rcpts.some((to) => holds.has(to))) {
          heldCount++;
          events.emit("held");
          return;
        }
        callback();
      });
    },
  });
  smtp.server.on("connection", (socket: Socket) => {
    accepted++;
    const port = socket.remotePort!;
    sockets.set(port, socket);
    socket.on("close", () => sockets.delete(port));
  });
  await new Promise<void>((resolve) => smtp.listen(0, "127.0.0.1", resolve));
  const smtpPort = (smtp.server.address() as AddressInfo).port;

  const sms = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const { to, body: text } = JSON.parse(body) as { to: string; body: string };
      const status = knock(to);
      if (status !== undefined) return res.writeHead(status, { "content-type": "application/json" }).end('{"message":"refused"}');
      messages.push({ to, text });
      res.writeHead(202).end();
    });
  });
  await new Promise<void>((resolve) => sms.listen(0, "127.0.0.1", resolve));
  const smsPort = (sms.address() as AddressInfo).port;

  return {
    smtpUrl: `smtp://127.0.0.1:${smtpPort}`,
    smsUrl: `http://127.0.0.1:${smsPort}/sms`,
    messages,
    async otp(to, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      // Phones arrive normalized (E.164); tests may name them in any spelling.
      to = to.startsWith("+") ? to.replace(/[^\d+]/g, "") : to;
      const seen = messages.length;
      for (;;) {
        for (let i = messages.length - 1; i >= 0; i--) {
          const code = messages[i].to === to.toLowerCase() ? /Your code is (\d{6})/.exec(messages[i].text)?.[1] : undefined;
          if (code) {
            messages.splice(i, 1); // each code is read once
            return code;
          }
        }
        if (Date.now() > deadline) throw new Error(`no code for ${to} (${seen} messages seen)`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    refuse(to, status, reply) {
      refusals.set(to.toLowerCase(), status);
      if (reply) replies.set(to.toLowerCase(), reply);
      else replies.delete(to.toLowerCase());
    },
    accept(to) {
      refusals.delete(to.toLowerCase());
      replies.delete(to.toLowerCase());
    },
    refuseSender(refusal) {
      senderRefusal = refusal;
    },
    dropAfterData(to) {
      drops.add(to.toLowerCase());
    },
    hold(to) {
      holds.add(to.toLowerCase());
    },
    async held(count) {
      while (heldCount < count) await once(events, "held");
    },
    async dropIdleConnections() {
      await Promise.all([...sockets.values()].map((socket) => (socket.end(), once(socket, "close"))));
    },
    connections: () => accepted,
    senders: () => mailFroms,
    tries: (to) => tried.get(to.toLowerCase()) ?? 0,
    async close() {
      // held sessions never end by themselves
      for (const socket of sockets.values()) socket.destroy();
      await new Promise<void>((resolve) => smtp.close(() => resolve()));
      await new Promise<void>((resolve) => sms.close(() => resolve()));
    },
  };
}
