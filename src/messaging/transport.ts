// Where OTPs and security notices go: e-mail over SMTP, texts as a JSON POST to the SMS
// webhook, or (development without transports) a log line. Transient SMTP and HTTP faults are
// retried in-process with p-retry; a message that still cannot be sent fails the request.
//
// What is retried (docs/configuration.md, "Every variable", the paragraph after the transports): a connection that failed (nothing was
// sent), an SMS webhook's 5xx, 408 or 429, an SMTP 4xx. Not retried: a recipient refused for good
// (RecipientRefused: the webhook's 400 or 422, as SMS gateways answer for a number that cannot
// take texts; an SMTP 5xx to RCPT TO), any other permanent refusal, and an SMS webhook or SMTP
// server that did not answer in time, since it may have sent the message: each retry could be one
// more paid text, or one more copy.
import nodemailer, { type SendMailOptions, type Transporter } from "nodemailer";
import pRetry, { AbortError } from "p-retry";
import type { Logger } from "pino";
/** An e-mail address or an E.164 phone number (src/auth/identifiers.ts parses them). */
export type Recipient = { kind: "email" | "phone"; value: string };

export type Message = { to: Recipient; subject: string; text: string; /** the OTP, for the dev log only */ code?: string };
export type Messenger = { send(message: Message): Promise<void>; close(): void };

export type MessengerOptions = { smtpUrl?: string; smtpFrom: string; smsWebhookUrl?: string; logger: Logger };

/**
 * The SMTP URL with nodemailer's connection pool on (unless the URL says otherwise): a
 * connection per message cost a TCP and SMTP handshake on every code sent, about a fifth of a
 * sign-in's server CPU (bench/RESULTS.md, sign-in). nodemailer reads `pool` from the URL's query.
 */
function pooled(smtpUrl: string): string {
  const url = new URL(smtpUrl);
  for (const [name, value] of Object.entries(SMTP_DEFAULTS)) if (!url.searchParams.has(name)) url.searchParams.set(name, value);
  return url.href;
}

/**
 * nodemailer's own deadlines are 2 minutes to connect and 10 minutes of silence: a relay that
 * took a message and never acknowledged it held a code's request that long, and a notice past
 * the 2-minute lease of its claim, which another sender then sent again (30th review). Three
 * tries of these stay well within that lease. The URL's own query wins.
 */
const SMTP_DEFAULTS = { pool: "true", connectionTimeout: "10000", greetingTimeout: "10000", socketTimeout: "15000" };

/** The transport refused this recipient for good: sending to it again would fail the same way. */
export class RecipientRefused extends Error {}

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
      body: JSON.stringify({ to, body: text }),
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

type SmtpError = Error & { code?: string; responseCode?: number; rejected?: unknown[] };

async function sendMail(mailer: Transporter, mail: SendMailOptions): Promise<void> {
  try {
    await mailer.sendMail(mail);
  } catch (err) {
    const e = err as SmtpError;
    // no answer in time: the relay may have taken the message, and sending it again would be a
    // second copy (as a text that timed out is not sent again). nodemailer does not say at which
    // step the silence came, so a connection that timed out is not tried again either.
    if (e.code === "ETIMEDOUT") throw new AbortError(e);
    if (!e.responseCode || e.responseCode < 500) throw err;
    if (e.code === "EENVELOPE" && e.rejected?.length) throw new AbortError(new RecipientRefused(`the SMTP server refused the address (${e.responseCode})`));
    throw new AbortError(e);
  }
}

export function createMessenger(opts: MessengerOptions): Messenger {
  const mailer = opts.smtpUrl ? nodemailer.createTransport(pooled(opts.smtpUrl)) : undefined;
  const sms = opts.smsWebhookUrl ? smsTarget(opts.smsWebhookUrl) : undefined;
  const retry = <T>(fn: () => Promise<T>) => pRetry(fn, { retries: 2, minTimeout: 100, maxTimeout: 1000 });

  async function send(message: Message): Promise<void> {
    const { to } = message;
    if (to.kind === "email" && mailer) {
      await retry(() => sendMail(mailer, { from: opts.smtpFrom, to: to.value, subject: message.subject, text: message.text }));
    } else if (to.kind === "phone" && sms) {
      await retry(() => postText(sms, to.value, message.text));
    } else {
      // Development only (production refuses to start without transports): each OTP is logged
      // so a developer can sign in without a mail server (docs/configuration.md, "Every variable").
      opts.logger.info({ to: to.value, code: message.code, subject: message.subject }, "message not sent (no transport configured)");
    }
  }

  return { send, close: () => mailer?.close() };
}
