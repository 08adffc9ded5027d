// A start checks the SMTP relay without sending anything (connect, hello, TLS, login): a relay
// that is not there or refuses linkgate's password is said in the log at start, while the server
// starts anyway; before, the first user whose code never came found it.
import { randomBytes } from "node:crypto";
import { SMTPServer } from "smtp-server";
import { afterAll, describe, expect, it } from "vitest";
import { closedPort } from "./support/receiver.ts";
import { startCommand } from "./support/command.ts";
import { startMailbox } from "./support/mailbox.ts";
import { MAIN, migratedDataDir } from "./support/server-entry.ts";

const started: Array<ReturnType<typeof startCommand>> = [];
afterAll(async () => {
  for (const s of started) {
    s.child.kill("SIGTERM");
    await s.closed;
  }
});

const WARNING = "e-mails cannot be sent";

/** The server with SMTP_URL, up and listening; its output so far once the check has had its time. */
async function startWith(smtpUrl: string) {
  const s = startCommand([MAIN], { LINKGATE_DATA_DIR: migratedDataDir("linkgate-smtp-check-"), SMTP_URL: smtpUrl, LINKGATE_SECRET_KEY: randomBytes(32).toString("base64") });
  started.push(s);
  await s.said("linkgate listening on");
  return s;
}

describe("the SMTP relay, checked at start", () => {
  it("one that is not there is a warning in the log, and the server serves anyway", async () => {
    const s = await startWith(`smtp://127.0.0.1:${await closedPort()}`);
    await s.said(WARNING);
    expect(s.child.exitCode).toBeNull();
  });

  it("one that refuses the password is a warning naming its answer, never the password", async () => {
    const relay = new SMTPServer({
      authOptional: false,
      allowInsecureAuth: true,
      disabledCommands: ["STARTTLS"],
      logger: false,
      onAuth: (_auth, _session, callback) => callback(new Error("5.7.8 authentication credentials invalid")),
    });
    await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
    try {
      const port = (relay.server.address() as { port: number }).port;
      const s = await startWith(`smtp://linkgate:Wr0ng-Secret@127.0.0.1:${port}?requireTLS=false`);
      await s.said(WARNING);
      s.child.kill("SIGTERM");
      const { stdout } = await s.closed;
      const line = stdout.split("\n").find((l) => l.includes(WARNING))!;
      expect(JSON.parse(line).fault).toMatch(/535|credentials invalid/);
      expect(stdout).not.toContain("Wr0ng-Secret");
    } finally {
      await new Promise<void>((resolve) => relay.close(() => resolve()));
    }
  });

  it("one that answers says nothing", async () => {
    const mailbox = await startMailbox();
    try {
      const s = await startWith(mailbox.smtpUrl);
      await s.said("the SMTP server (SMTP_URL) answered the start's check");
      expect(mailbox.connections()).toBeGreaterThan(0);
      s.child.kill("SIGTERM");
      const { stdout } = await s.closed;
      expect(stdout).not.toContain(WARNING);
    } finally {
      await mailbox.close();
    }
  });
});
