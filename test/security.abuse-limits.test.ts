// Abuse limits nobody can turn against a user (docs/security.md): sends and wrong codes per
// identifier are counted per client address, so a stranger exhausts only their own budget;
// per-address and per-project ceilings stop bulk sending (SMS pumping) and say so once.
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { onSocket, startHarness, type Harness } from "./support/app.ts";

const phone = (i: number) => `+1202555${String(100 + i).padStart(4, "0")}`;

async function suspicious(h: Harness, reason: string): Promise<number> {
  return h.db.prisma.outboxEvent.count({ where: { eventType: "security.suspicious_activity", body: { contains: `"reason":"${reason}"` } } });
}

async function start(h: Harness, from: string, identifier: Record<string, string>) {
  return h.call("POST", "/auth/otp/start", { body: identifier, from });
}

async function wrongCode(h: Harness, from: string, stateId: string, right: string) {
  return h.call("POST", "/auth/otp/verify", { body: { state_id: stateId, otp: right === "000000" ? "111111" : "000000" }, from });
}

describe.each(backends)("abuse limits on %s", (backend) => {
  describe("a stranger cannot lock the owner out", () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(backend, { env: { LINKGATE_LIMIT_SENDS_PER_ADDRESS_HOURLY: "50" } });
    });
    afterAll(() => h?.close());
    const attacker = "198.51.100.66";
    const owner = "203.0.113.10";

    it("five sends for the victim from one address stop that address, not the owner elsewhere", async () => {
      const victim = { email: "victim-sends@example.com" };
      for (let i = 0; i < 5; i++) expect((await start(h, attacker, victim)).status).toBe(200);
      const refused = await start(h, attacker, victim);
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);

      const own = await start(h, owner, victim);
      expect(own.status).toBe(200);
      const otp = await h.mailbox.otp(victim.email); // the newest code: the owner's
      const verified = await h.call("POST", "/auth/otp/verify", { body: { state_id: own.body.state_id, otp }, from: owner });
      expect(verified.status).toBe(200);
    });

    it("fifteen wrong codes from one address stop new codes for that address only", async () => {
      const victim = { email: "victim-guesses@example.com" };
      for (let s = 0; s < 3; s++) {
        const st = await start(h, attacker, victim);
        expect(st.status).toBe(200);
        const right = await h.mailbox.otp(victim.email);
        for (let i = 0; i < 5; i++) expect((await wrongCode(h, attacker, st.body.state_id, right)).body.error).toBe("OTPInvalid");
      }
      expect((await start(h, attacker, victim)).status).toBe(429);

      const own = await start(h, owner, victim);
      expect(own.status).toBe(200);
      const otp = await h.mailbox.otp(victim.email);
      const verified = await h.call("POST", "/auth/otp/verify", { body: { state_id: own.body.state_id, otp }, from: owner });
      expect(verified.status).toBe(200);
      expect(verified.body.account_id).toMatch(/^acc_/);
    });
  });

  describe("ceilings on sending", () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(backend, {
        env: { LINKGATE_LIMIT_SENDS_PER_ADDRESS_HOURLY: "10", LINKGATE_LIMIT_SMS_PER_PROJECT_HOURLY: "16" },
      });
    });
    afterAll(() => h?.close());
    const texted = () => h.mailbox.messages.filter((m) => m.to.startsWith("+1202555")).length;

    it("a burst of texts to distinct numbers from one address stops at its ceiling, with one event", async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 40; i++) statuses.push((await start(h, "192.0.2.50", { phone: phone(i) })).status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(10);
      expect(statuses.slice(10).every((s) => s === 429)).toBe(true);
      expect(texted()).toBe(10);
      expect(await suspicious(h, "send_ceiling_per_address")).toBe(1);
    });

    it("requests refused by the address ceiling did not drain the project's; many addresses stop at it, with one event", async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 12; i++) statuses.push((await start(h, `192.0.2.${100 + i}`, { phone: phone(100 + i) })).status);
      // 16 texts an hour for the project: 10 went out above, 6 more now, whatever the 30 refused requests
      expect(statuses.filter((s) => s === 200)).toHaveLength(6);
      expect(statuses.slice(6).every((s) => s === 429)).toBe(true);
      expect(texted()).toBe(16);
      expect(await suspicious(h, "send_ceiling_per_project")).toBe(1);
      // e-mails have their own ceiling
      expect((await start(h, "192.0.2.200", { email: "still-mailed@example.com" })).status).toBe(200);
    });
  });

  describe("the client address on a real socket", () => {
    let direct: Harness, proxied: Harness;
    let directPort: number, proxiedPort: number;
    const sockets: Array<{ close(): Promise<void> }> = [];
    const listen = async (h: Harness) => {
      const socket = await onSocket(h);
      sockets.push(socket);
      return socket.port;
    };
    beforeAll(async () => {
      direct = await startHarness(backend);
      proxied = await startHarness(backend, { env: { LINKGATE_TRUSTED_PROXIES: "127.0.0.1" } });
      directPort = await listen(direct);
      proxiedPort = await listen(proxied);
    });
    afterAll(async () => {
      for (const s of sockets) await s.close();
      await direct?.close();
      await proxied?.close();
    });

    /** POSTs a sign-in start over TCP from `localAddress` (any 127.x address is this machine). */
    function post(h: Harness, port: number, body: object, opts: { localAddress?: string; forwardedFor?: string } = {}) {
      return new Promise<number>((resolve, reject) => {
        const headers: Record<string, string> = { "content-type": "application/json", "x-api-key": h.publishableKey };
        if (opts.forwardedFor) headers["x-forwarded-for"] = opts.forwardedFor;
        const req = http.request({ host: "127.0.0.1", port, path: "/auth/otp/start", method: "POST", headers, localAddress: opts.localAddress }, (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode!));
        });
        req.on("error", reject);
        req.end(JSON.stringify(body));
      });
    }

    it("two clients at different socket addresses have separate budgets; X-Forwarded-For from an untrusted peer is ignored", async () => {
      const victim = { email: "socket-victim@example.com" };
      for (let i = 0; i < 5; i++) expect(await post(direct, directPort, victim, { localAddress: "127.0.0.2", forwardedFor: `10.0.0.${i}` })).toBe(200);
      expect(await post(direct, directPort, victim, { localAddress: "127.0.0.2", forwardedFor: "10.9.9.9" })).toBe(429);
      expect(await post(direct, directPort, victim, { localAddress: "127.0.0.3" })).toBe(200);
    });

    it("behind a trusted proxy, each real client named by X-Forwarded-For is counted on its own", async () => {
      const victim = { email: "proxied-victim@example.com" };
      for (let i = 0; i < 5; i++) expect(await post(proxied, proxiedPort, victim, { forwardedFor: "198.51.100.1" })).toBe(200);
      expect(await post(proxied, proxiedPort, victim, { forwardedFor: "198.51.100.1" })).toBe(429);
      // a client cannot pick a fresh address by prepending one: the proxy appended the real one
      expect(await post(proxied, proxiedPort, victim, { forwardedFor: "203.0.113.77, 198.51.100.1" })).toBe(429);
      expect(await post(proxied, proxiedPort, victim, { forwardedFor: "198.51.100.2" })).toBe(200);
    });

    it("behind a proxy that writes ip:port, every source port of one client is that client (twelfth review)", async () => {
      const victim = { email: "ported-victim@example.com" };
      for (let i = 0; i < 5; i++) expect(await post(proxied, proxiedPort, victim, { forwardedFor: `198.51.100.9:${4000 + i}` })).toBe(200);
      expect(await post(proxied, proxiedPort, victim, { forwardedFor: "198.51.100.9:4005" })).toBe(429);
      expect(await post(proxied, proxiedPort, victim, { forwardedFor: "[::ffff:198.51.100.9]:4006" })).toBe(429);
    });
  });
});
