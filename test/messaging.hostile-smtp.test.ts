// Sign-in against an SMTP server that behaves as real relays do rather than as a friendly sink:
// it ends idle connections, refuses to relay, refuses the sender, drops a connection after
// taking a message. What the user is answered and what reaches the mailbox
// (docs/configuration.md, "Every variable", the paragraph after the transports).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../src/log.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

describe.each(backends)("sign-in codes through a hostile SMTP server on %s", (backend) => {
  let h: Harness;
  const lines: string[] = [];
  const logged = (msg: string) => lines.map((l) => JSON.parse(l)).filter((l) => l.msg === msg);
  beforeAll(async () => {
    h = await startHarness(backend, { logger: createLogger("info", { write: (line: string) => void lines.push(line) }) });
  });
  afterAll(async () => {
    await h?.close();
  });

  const start = (email: string) => h.call("POST", "/auth/otp/start", { body: { email } });
  const signInWith = async (email: string) => {
    const started = await start(email);
    expect(started.status, JSON.stringify(started.body)).toBe(200);
    const otp = await h.mailbox.otp(email);
    return h.call("POST", "/auth/otp/verify", { body: { state_id: started.body.state_id, otp } });
  };

  it("a server that ended the pooled connection while it was idle: the next code goes out on a new one", async () => {
    expect((await signInWith("idle-one@example.com")).status).toBe(200);
    const before = h.mailbox.connections();
    await h.mailbox.dropIdleConnections();
    expect((await signInWith("idle-two@example.com")).status).toBe(200);
    expect(h.mailbox.connections()).toBeGreaterThan(before);
    expect(logged("a code could not be sent")).toEqual([]);
  });

  it("a relay that does not relay for linkgate (5.7.1 at RCPT TO) is an outage for the operator, not the user's bad address", async () => {
    // Postfix's answer to a client it does not relay for
    h.mailbox.refuse("relayed@example.com", 554, "5.7.1 <relayed@example.com>: Relay access denied");
    lines.length = 0;
    const r = await start("relayed@example.com");
    expect(r.status, JSON.stringify(r.body)).toBe(503);
    expect(r.body.error).toBe("ServiceUnavailable");
    expect(r.headers.get("retry-after")).toBe("30");
    // a refusal for good: not tried again, and said once
    expect(h.mailbox.tries("relayed@example.com")).toBe(1);
    const errors = logged("a code could not be sent");
    expect(errors).toHaveLength(1);
    expect(errors[0].err.message).toContain("Relay access denied");
    expect(await h.db.prisma.otpState.count({ where: { value: "relayed@example.com" } })).toBe(0);
    h.mailbox.accept("relayed@example.com");
  });

  it("an address the server refuses for good (550 5.1.1) is the user's bad address, tried once", async () => {
    h.mailbox.refuse("nobody@example.com", 550, "5.1.1 <nobody@example.com>: Recipient address rejected: User unknown");
    const r = await start("nobody@example.com");
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: "InvalidIdentifier", message: "that e-mail address does not accept mail" });
    expect(h.mailbox.tries("nobody@example.com")).toBe(1);
    h.mailbox.accept("nobody@example.com");
  });

  it("a server that refuses the sender (MAIL FROM) fails the request once, logged, and is not tried again", async () => {
    h.mailbox.refuseSender({ status: 553, reply: "5.7.1 <no-reply@localhost>: Sender address rejected: not owned by user linkgate" });
    lines.length = 0;
    const senders = h.mailbox.senders();
    try {
      const r = await start("sender-refused@example.com");
      expect(r.status).toBe(503);
      expect(r.body.error).toBe("ServiceUnavailable");
      const errors = logged("a code could not be sent");
      expect(errors).toHaveLength(1);
      expect(errors[0].err.message).toContain("Sender address rejected");
      expect(h.mailbox.senders() - senders).toBe(1);
    } finally {
      h.mailbox.refuseSender(null);
    }
  });

  it("a connection dropped after the whole message went out, before the 250: one copy only, 503, and the next request sends a new code", async () => {
    h.mailbox.dropAfterData("dropped@example.com");
    const r = await start("dropped@example.com");
    expect(r.status, JSON.stringify(r.body)).toBe(503);
    expect(r.body.error).toBe("ServiceUnavailable");
    // the relay may have queued it: it is not sent again
    expect(h.mailbox.tries("dropped@example.com")).toBe(1);
    expect(h.mailbox.messages.filter((m) => m.to === "dropped@example.com")).toHaveLength(1);
    // that copy's code has no state (docs: no code is kept for the request)
    const stale = await h.mailbox.otp("dropped@example.com");
    const verified = await signInWith("dropped@example.com");
    expect(verified.status).toBe(200);
    expect(h.mailbox.tries("dropped@example.com")).toBe(2);
    expect(stale).toMatch(/^\d{6}$/);
  });
});
