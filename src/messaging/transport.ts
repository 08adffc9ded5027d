// Where OTPs and security notices go: e-mail over SMTP, texts as a JSON POST to the SMS
// webhook, or (development without transports) a log line. Transient SMTP and HTTP faults are
// retried in-process with p-retry; a message that still cannot be sent fails the request.
//
// What is retried (docs/configuration.md, "Every variable", the paragraph after the transports): a connection that failed (nothing was
// sent), an SMS webhook's 5xx, 408 or 429, an SMTP 4xx. Not retried: a recipient refused for good
// (RecipientRefused: the webhook's 400 or 422, as SMS gateways answer for a number that cannot
// take texts; an SMTP 5xx to RCPT TO that is about the address, not a relay refusing linkgate),
// any other permanent refusal, and an SMS webhook or SMTP server that did not answer in time, or
// an SMTP connection that ended after the whole message went out, since it may have sent the
// message: each retry could be one more paid text, or one more copy.
import { Transform } from "node:stream";
import nodemailer, { type SendMailOptions, type Transporter } from "nodemailer";
import pRetry, { AbortError } from "p-retry";
import type { Logger } from "pino";
/** An e-mail address or an E.164 phone number (src/auth/identifiers.ts parses them). */
export type Recipient = { kind: "email" | "phone"; value: string };

export type Message = { to: Recipient; subject: string; text: string; /** the OTP, for the dev log only */ code?: string };
export type Messenger = {
  send(message: Message): Promise<void>;
  /** What stops e-mails from going out, found without sending one: null when nothing does, undefined when there is no SMTP server to check. */
  check(): Promise<string | null | undefined>;
  close(): void;
};

export type MessengerOptions = { smtpUrl?: string; smtpFrom: string; smsWebhookUrl?: string; logger: Logger };

/**
 * The SMTP URL with nodemailer's connection pool on (unless the URL says otherwise): a
 * connection per message cost a TCP and SMTP handshake on every code sent, about a fifth of a
 * sign-in's server CPU (bench/RESULTS.md, sign-in). nodemailer reads `pool` from the URL's query;
 * `sendTimeout` is linkgate's own and is taken out.
 */
function smtpSettings(smtpUrl: string): { url: string; sendTimeoutMs: number } {
  const url = new URL(smtpUrl);
  for (const [name, value] of Object.entries(SMTP_DEFAULTS)) if (!url.searchParams.has(name)) url.searchParams.set(name, value);
  if (sendsCredentialsInTheClearUnlessTold(url)) url.searchParams.set("requireTLS", "true");
  const sendTimeoutMs = Number(url.searchParams.get("sendTimeout"));
  url.searchParams.delete("sendTimeout");
  return { url: url.href, sendTimeoutMs: sendTimeoutMs > 0 ? sendTimeoutMs : Number(SMTP_DEFAULTS.sendTimeout) };
}

/**
 * nodemailer's own deadlines are 2 minutes to connect and 10 minutes of silence: a relay that
 * took a message and never acknowledged it held a code's request that long, and a notice past
 * the 2-minute lease of its claim, which another sender then sent again (30th review). Three
 * tries of these stay well within that lease. The URL's own query wins.
 *
 * `sendTimeout` bounds one try as a whole, the wait for a free pooled connection included:
 * the socket's deadlines count silence on one connection only, so five sessions a relay held
 * just under them kept every other code queued behind them, a request waiting as long as the
 * queue was (docs/configuration.md, "Every variable").
 */
const SMTP_DEFAULTS = { pool: "true", connectionTimeout: "10000", greetingTimeout: "10000", socketTimeout: "15000", sendTimeout: "20000" };

/**
 * An `smtp://` URL with a user and password upgrades to TLS with STARTTLS only when the server
 * offers it, and nodemailer otherwise logs in and sends in the clear: anyone on the path who
 * strips the offer (an answer without the STARTTLS line) read the relay's password and every
 * code (smtp review). With credentials, STARTTLS is required unless the URL says
 * `requireTLS=false` (a relay on the same machine that has no TLS), and a relay without it fails
 * the send, its password unsent (docs/configuration.md, "Every variable"). `smtps://` is TLS
 * from the first byte; without credentials a relay on a private network is left as it was.
 */
function sendsCredentialsInTheClearUnlessTold(url: URL): boolean {
  return url.protocol === "smtp:" && (url.username !== "" || url.password !== "") && !url.searchParams.has("requireTLS");
}

/** The transport refused this recipient for good: sending to it again would fail the same way. */
export class RecipientRefused extends Error {}

/**
 * The characters linkgate's own texts use that have a plain equivalent in the GSM 7-bit alphabet
 * an SMS is counted in (the masks of notices, `a•••@example.com`; "…and 3 more changes"; quotes
 * and dashes). One character outside that alphabet sends the whole text as UCS-2, 70 characters
 * a segment instead of 160, and the operator pays for each segment: a gathered notice of 1,000
 * characters was 15 segments instead of 7 (docs/security.md, "Message budgets").
 */
const GSM7_EQUIVALENTS: Record<string, string> = { "•": "*", "…": "...", "‘": "'", "’": "'", "“": '"', "”": '"', "–": "-", "—": "-", "\u00a0": " " };
const OUTSIDE_GSM7 = new RegExp(`[${Object.keys(GSM7_EQUIVALENTS).join("")}]`, "g");

/** A text as texted: linkgate's own characters outside GSM-7 replaced by their equivalents. */
export const smsText = (text: string): string => text.replace(OUTSIDE_GSM7, (c) => GSM7_EQUIVALENTS[c]);

/** The SMS webhook's answers that say the request itself (the number) is refused. */
const REFUSES_RECIPIENT = new Set([400, 422]);
/** The SMS webhook's answers worth another try. */
const TRANSIENT = (status: number) => status >= 500 || status === 408 || status === 429;

/**
 * Where texts go: the URL without its user and password, which go as HTTP Basic credentials.
 * fetch refuses a URL that carries them, so every text failed, and its error, logged and stored
 * with the notice, spelled out the password (30th review).
 */
function smsTarget(raw: string): { url: string; headers: Record<string, string> } {
  const url = new URL(raw);
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (url.username || url.password) {
    headers.authorization = `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString("base64")}`;
    url.username = "";
    url.password = "";
  }
  return { url: url.href, headers };
}

async function postText(target: { url: string; headers: Record<string, string> }, to: string, text: string): Promise<void> {
  let res: Response;
  try {
    res = await fetch(target.url, {
      method: "POST",
      headers: target.headers,
      body: JSON.stringify({ to, body: smsText(text) }),
      // a redirect would send the number and the text to another address: an answer that is not one
      redirect: "error",
      signal: AbortSignal.timeout(10_000),
    });
  } catch (err) {
    // no answer in time: the gateway may have sent the text, so it is not sent again
    if (err instanceof Error && err.name === "TimeoutError") throw new AbortError(err);
    throw err;
  }
  await res.body?.cancel();
  if (res.ok) return;
  if (REFUSES_RECIPIENT.has(res.status)) throw new AbortError(new RecipientRefused(`the SMS webhook refused the number (HTTP ${res.status})`));
  const failed = new Error(`SMS webhook answered ${res.status}`);
  throw TRANSIENT(res.status) ? failed : new AbortError(failed);
}

type SmtpError = Error & { code?: string; responseCode?: number; response?: string; rejected?: unknown[] };

/**
 * A refusal of a recipient that is the relay refusing linkgate, not the address: RFC 3463's
 * 5.7.x (not authorized: relaying denied, authentication required, sender not allowed), or a
 * reply that says relaying is denied without an enhanced code. Taken for the address's own,
 * a relay that does not relay for linkgate told every user their address "does not accept
 * mail", and the operator nothing (docs/configuration.md, "Every variable").
 */
const refusesUs = (e: SmtpError) => {
  const reply = e.response ?? "";
  // the address itself (<relay@example.com>) says nothing about relaying
  return /^\d{3}[ -]5\.7\.\d/.test(reply) || /relay/i.test(reply.replace(/<[^>]*>/g, ""));
};

/**
 * Marks a message whose whole text nodemailer has read out onto the connection: from then on
 * the server may have taken it, and a dropped connection before its 250 is no reason to send it
 * again (one more copy of the code). Keyed by the try's own AbortSignal, the one object of the
 * try that reaches the plugin as it was given (nodemailer copies the mail's fields).
 */
function trackHandOver(mailer: Transporter, handedOver: WeakSet<AbortSignal>): void {
  mailer.use("stream", (mail, done) => {
    const signal = mail.data.signal;
    if (signal) {
      mail.message.transform(
        () =>
          new Transform({
            transform: (chunk, _encoding, callback) => callback(null, chunk),
            flush: (callback) => {
              handedOver.add(signal);
              callback();
            },
          }),
      );
    }
    done();
  });
}

async function sendMail(mailer: Transporter, mail: SendMailOptions, sendTimeoutMs: number, handedOver: WeakSet<AbortSignal>): Promise<void> {
  const signal = AbortSignal.timeout(sendTimeoutMs);
  try {
    await mailer.sendMail({ ...mail, signal });
  } catch (err) {
    const e = err as SmtpError;
    // no answer in time: the relay may have taken the message, and sending it again would be a
    // second copy (as a text that timed out is not sent again). nodemailer does not say at which
    // step the silence came, so a connection that timed out is not tried again either; nor a try
    // past its whole deadline (sendTimeout), which found the relay as slow.
    if (e.code === "ETIMEDOUT" || e.code === "EABORT") throw new AbortError(e);
    // the connection ended, unanswered, after the whole message went out: the relay may have
    // queued it (a reply after it, such as a 451, says it did not)
    if (!e.responseCode && handedOver.has(signal)) throw new AbortError(e);
    if (!e.responseCode || e.responseCode < 500) throw err;
    if (e.code === "EENVELOPE" && e.rejected?.length && !refusesUs(e)) throw new AbortError(new RecipientRefused(`the SMTP server refused the address (${e.responseCode})`));
    throw new AbortError(e);
  }
}

/** An SMTP failure in words that name no secret (nodemailer's errors carry the reply, never the URL). */
function describeSmtpFault(e: SmtpError): string {
  return [e.code, e.responseCode, e.response ?? e.message].filter((part) => part !== undefined && part !== "").join(" ");
}

export function createMessenger(opts: MessengerOptions): Messenger {
  const smtp = opts.smtpUrl ? smtpSettings(opts.smtpUrl) : undefined;
  const mailer = smtp ? nodemailer.createTransport(smtp.url) : undefined;
  const handedOver = new WeakSet<AbortSignal>();
  if (mailer) trackHandOver(mailer, handedOver);
  const sms = opts.smsWebhookUrl ? smsTarget(opts.smsWebhookUrl) : undefined;
  const retry = <T>(fn: () => Promise<T>) => pRetry(fn, { retries: 2, minTimeout: 100, maxTimeout: 1000 });

  async function send(message: Message): Promise<void> {
    const { to } = message;
    if (to.kind === "email" && mailer && smtp) {
      await retry(() => sendMail(mailer, { from: opts.smtpFrom, to: to.value, subject: message.subject, text: message.text }, smtp.sendTimeoutMs, handedOver));
    } else if (to.kind === "phone" && sms) {
      await retry(() => postText(sms, to.value, message.text));
    } else {
      // Development only (production refuses to start without transports): each OTP is logged
      // so a developer can sign in without a mail server (docs/configuration.md, "Every variable").
      opts.logger.info({ to: to.value, code: message.code, subject: message.subject }, "message not sent (no transport configured)");
    }
  }

  /**
   * Connects, says hello, upgrades to TLS and logs in as a send would, and sends nothing: a relay
   * that is not there, refuses the password or has no certificate linkgate trusts was found only
   * at the first code, by its user (smtp review). An SMS webhook cannot be checked without
   * sending a text.
   */
  async function check(): Promise<string | null | undefined> {
    if (!mailer || !smtp) return undefined;
    try {
      await Promise.race([mailer.verify(), new Promise((_, reject) => setTimeout(() => reject(new Error(`no answer within ${smtp.sendTimeoutMs} ms`)), smtp.sendTimeoutMs).unref())]);
      return null;
    } catch (err) {
      return describeSmtpFault(err as SmtpError);
    }
  }

  return { send, check, close: () => mailer?.close() };
}
