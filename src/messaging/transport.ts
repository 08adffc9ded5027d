// Where OTPs and security notices go: e-mail over SMTP, texts as a JSON POST to the SMS
// webhook, or (development without transports) a log line. Transient SMTP and HTTP faults are
// retried in-process with p-retry; a message that still cannot be sent fails the request.
import nodemailer from "nodemailer";
import pRetry from "p-retry";
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
  if (!url.searchParams.has("pool")) url.searchParams.set("pool", "true");
  return url.href;
}

export function createMessenger(opts: MessengerOptions): Messenger {
  const mailer = opts.smtpUrl ? nodemailer.createTransport(pooled(opts.smtpUrl)) : undefined;
  const retry = <T>(fn: () => Promise<T>) => pRetry(fn, { retries: 2, minTimeout: 100, maxTimeout: 1000 });

  async function send(message: Message): Promise<void> {
    const { to } = message;
    if (to.kind === "email" && mailer) {
      await retry(() => mailer.sendMail({ from: opts.smtpFrom, to: to.value, subject: message.subject, text: message.text }));
    } else if (to.kind === "phone" && opts.smsWebhookUrl) {
      const url = opts.smsWebhookUrl;
      await retry(async () => {
        const res = await fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ to: to.value, body: message.text }),
          signal: AbortSignal.timeout(10_000),
        });
        await res.body?.cancel();
        if (!res.ok) throw new Error(`SMS webhook answered ${res.status}`);
      });
    } else {
      // Development only (production refuses to start without transports): each OTP is logged
      // so a developer can sign in without a mail server (docs/configuration.md, "Every variable").
      opts.logger.info({ to: to.value, code: message.code, subject: message.subject }, "message not sent (no transport configured)");
    }
  }

  return { send, close: () => mailer?.close() };
}
