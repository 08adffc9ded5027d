import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { createReceiver } from "../examples/receiver/server.ts";
import { generateWebhookSecret } from "../src/webhooks/secrets.ts";
import { signatureHeaders } from "../src/webhooks/signing.ts";

const OLD = generateWebhookSecret();
const NEW = generateWebhookSecret();
const body = JSON.stringify({ id: "evt_9", event_type: "user.updated", created_at: "2026-11-21T10:00:00.000000000Z", project_id: "prj_1", data: {} });

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

async function start(secrets: string[]): Promise<string> {
  const server = createReceiver(secrets);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhook`;
}

const transitionHeaders = (b: string) =>
  signatureHeaders({
    body: b,
    eventId: "evt_9",
    eventType: "user.updated",
    attempt: 1,
    timestamp: Math.floor(Date.now() / 1000),
    secrets: { current: NEW, previous: OLD },
  });

const post = (url: string, b: string, headers: Record<string, string>) => fetch(url, { method: "POST", body: b, headers });

describe("examples/receiver", () => {
  it("during a transition, receivers holding only the old or only the new secret both accept", async () => {
    for (const held of [[OLD], [NEW]]) {
      const res = await post(await start(held), body, transitionHeaders(body));
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ received: "evt_9" });
    }
  });

  it("answers 401 for a tampered body", async () => {
    const res = await post(await start([NEW]), body.replace("prj_1", "prj_2"), transitionHeaders(body));
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: "invalid_signature" });
  });

  it("answers 400 for an unsigned delivery", async () => {
    const res = await post(await start([NEW]), body, { "content-type": "application/json" });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "missing_signature" });
  });

  // A malformed secret refused by verifyWebhook at the first delivery would throw inside the
  // request handler and take the process down with it; it is refused when the receiver is made.
  it("refuses a malformed secret when it is made, not at the first delivery", () => {
    for (const bad of ["whsec_ab!!cd", "whsec_AB", NEW + "\n"]) expect(() => createReceiver([NEW, bad])).toThrow(TypeError);
  });

  it("answers 400 for a legacy-only replay: it verifies Standard Webhooks only", async () => {
    const old = signatureHeaders({ body, eventId: "evt_9", eventType: "user.updated", attempt: 1, timestamp: Math.floor(Date.now() / 1000) - 86_400, secrets: { current: NEW } });
    const replay = Object.fromEntries(Object.entries(old).filter(([k]) => !k.startsWith("webhook-")));
    const res = await post(await start([NEW]), body, replay);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "missing_signature" });
  });

  it("answers 401 for a secret from after the transition", async () => {
    const res = await post(await start([generateWebhookSecret()]), body, transitionHeaders(body));
    expect(res.status).toBe(401);
  });
});
