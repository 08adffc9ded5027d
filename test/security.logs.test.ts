// No secret, code or token ever reaches a log line, even at debug level.
import pino from "pino";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWorker } from "../src/delivery/worker.ts";
import { CreateWebhookDocument, RotateWebhookSecretDocument, SendTestWebhookDocument } from "./generated/operations.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { TestReceiver } from "./support/receiver.ts";

describe.each(backends)("logs on %s", (backend) => {
  let h: Harness;
  const lines: string[] = [];
  beforeAll(async () => {
    const sink = new Writable({ write: (chunk, _e, cb) => (lines.push(String(chunk)), cb()) });
    h = await startHarness(backend, { logger: pino({ level: "trace" }, sink) });
  });
  afterAll(() => h?.close());

  it("a GraphQL request refused for its own input or limits is no error line: a negative first, a page out of range, an abuse limit", async () => {
    const from = lines.length;
    const user = { authorization: `Bearer ${(await h.signIn({ email: "refused@example.com" })).token}`, "x-api-key": h.publishableKey };
    const negative = await h.gql(`{ viewer { sessions(first: -1) { edges { cursor } } } }`, {}, user);
    expect(negative.body.errors[0].extensions.code).toBe("BAD_USER_INPUT");
    const outOfRange = await h.gql(`{ lookupAccount(email: "refused@example.com") { ... on AccountLookup { account { recentEvents(first: 1000) { id } } } } }`);
    expect(outOfRange.body.errors[0].extensions.code).toBe("BAD_USER_INPUT");
    let limited;
    for (let i = 0; i < 61; i++) limited = await h.gql(`mutation { startPasskeySignIn }`, {}, { "x-api-key": h.publishableKey });
    expect(limited!.body.errors[0].extensions.code).toBe("RATE_LIMITED");

    const errors = lines.slice(from).filter((l) => JSON.parse(l).level >= 50);
    expect(errors.map((l) => JSON.parse(l).err?.message)).toEqual([]);
  });

  it("a sign-in, a link, a webhook's life and its deliveries log no credential", async () => {
    const secrets: string[] = [h.apiKey, h.adminToken, h.config.secretKey!];
    const a = await h.signIn({ email: "quiet@example.com" });
    secrets.push(a.token, a.idToken);
    const auth = { authorization: `Bearer ${a.token}` };
    const req = await h.call("POST", "/users/link/request", { body: { phone: "+12025550188" }, headers: auth });
    const otp = await h.mailbox.otp("+12025550188");
    secrets.push(otp);
    await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp }, headers: auth });
    await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp: "000000" }, headers: { ...auth, "x-api-key": "lg_wrong_key_123456" } });

    const receiver = await TestReceiver.start();
    const created = await h.op(CreateWebhookDocument, { input: { url: receiver.url, events: ["user.updated"] } });
    if (created.createWebhook.__typename !== "CreateWebhookPayload") throw new Error();
    secrets.push(created.createWebhook.secret);
    const rotated = await h.op(RotateWebhookSecretDocument, { webhookId: created.createWebhook.webhook.id });
    if (rotated.rotateWebhookSecret.__typename !== "RotateWebhookSecretPayload") throw new Error();
    secrets.push(rotated.rotateWebhookSecret.newSecret);
    const worker = startWorker({ db: h.db, config: h.config, masterKey: h.app.deps.master, logger: h.app.deps.logger, pollMs: 50 });
    await h.op(SendTestWebhookDocument, { webhookId: created.createWebhook.webhook.id, eventType: "user.updated" });
    await receiver.waitFor(1);
    await worker.stop();
    await receiver.close();

    const log = lines.join("");
    expect(lines.length).toBeGreaterThan(5);
    for (const s of secrets) {
      expect(log.includes(s), `a log line contains a secret starting ${s.slice(0, 6)}`).toBe(false);
      if (s.startsWith("whsec_")) expect(log.includes(s.slice(6))).toBe(false);
    }
  });
});
