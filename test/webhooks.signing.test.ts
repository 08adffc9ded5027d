import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Webhook } from "standardwebhooks";
import { generateWebhookSecret, standardKey } from "../src/webhooks/secrets.ts";
import { liveSecrets, signatureHeaders } from "../src/webhooks/signing.ts";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

interface VectorCase {
  name: string;
  body: string;
  webhook_id: string;
  webhook_timestamp: string;
  current_secret: string;
  previous_secret: string;
  headers_outside_transition: Record<string, string>;
  headers_during_transition: Record<string, string>;
}
// The published test vectors, shipped with the receiver package: the signer must reproduce them.
const fixture = path.resolve(repoRoot, "packages/receiver/vectors/webhook-signatures.json");
const vectors: { cases: VectorCase[] } = JSON.parse(readFileSync(fixture, "utf8"));

const eventType = (body: string) => JSON.parse(body).event_type as string;

function headersFor(c: VectorCase, previous: string | null) {
  return signatureHeaders({
    body: c.body,
    eventId: c.webhook_id,
    eventType: eventType(c.body),
    attempt: 2,
    timestamp: Number(c.webhook_timestamp),
    secrets: { current: c.current_secret, previous },
  });
}

describe("signatureHeaders against the published vectors", () => {
  afterEach(() => vi.useRealTimers());

  it("has vectors to check", () => expect(vectors.cases.length).toBeGreaterThan(0));

  for (const c of vectors.cases) {
    const common = {
      "Content-Type": "application/json",
      "X-Service-Event-Id": c.webhook_id,
      "X-Service-Event-Type": eventType(c.body),
      "X-Service-Delivery-Attempt": "2",
      "webhook-id": c.webhook_id,
      "webhook-timestamp": c.webhook_timestamp,
    };

    it(`${c.name}: outside a transition`, () => {
      expect(headersFor(c, null)).toEqual({ ...common, ...c.headers_outside_transition });
    });

    it(`${c.name}: during a transition`, () => {
      expect(headersFor(c, c.previous_secret)).toEqual({ ...common, ...c.headers_during_transition });
    });

    it(`${c.name}: Buffer and string bodies sign identically`, () => {
      const fromBuffer = signatureHeaders({
        body: Buffer.from(c.body, "utf8"),
        eventId: c.webhook_id,
        eventType: eventType(c.body),
        attempt: 2,
        timestamp: Number(c.webhook_timestamp),
        secrets: { current: c.current_secret, previous: c.previous_secret },
      });
      expect(fromBuffer).toEqual(headersFor(c, c.previous_secret));
    });

    it(`${c.name}: the standardwebhooks library verifies with either secret`, () => {
      // The library checks the timestamp against Date.now(), so pin the clock to the vector's.
      vi.useFakeTimers({ toFake: ["Date"] });
      vi.setSystemTime(Number(c.webhook_timestamp) * 1000 + 30_000);
      const expected = JSON.parse(c.body);
      expect(new Webhook(c.current_secret).verify(c.body, headersFor(c, null))).toEqual(expected);
      const during = headersFor(c, c.previous_secret);
      expect(new Webhook(c.current_secret).verify(c.body, during)).toEqual(expected);
      expect(new Webhook(c.previous_secret).verify(c.body, during)).toEqual(expected);
      // Once the previous secret is dropped, a receiver that still holds only it must fail.
      expect(() => new Webhook(c.previous_secret).verify(c.body, headersFor(c, null))).toThrow();
    });
  }

  it("rejects millisecond timestamps", () => {
    const c = vectors.cases[0];
    expect(() =>
      signatureHeaders({ body: c.body, eventId: "e", eventType: "t", attempt: 1, timestamp: Date.now(), secrets: { current: c.current_secret } }),
    ).toThrow(RangeError);
  });
});

describe("secrets", () => {
  it("generates whsec_ + base64 of 32 bytes", () => {
    const s = generateWebhookSecret();
    expect(s).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(standardKey(s)).toHaveLength(32);
    expect(generateWebhookSecret()).not.toBe(s);
  });
});

describe("liveSecrets", () => {
  const ends = new Date("2026-11-28T10:00:00.000Z");
  const webhook = { secret: "whsec_new", previousSecret: "whsec_old", previousSecretExpiresAt: ends };

  it("keeps the previous secret until the transition ends", () => {
    expect(liveSecrets(webhook, new Date(ends.getTime() - 1))).toEqual({ current: "whsec_new", previous: "whsec_old" });
  });

  it("drops it at and after the end", () => {
    expect(liveSecrets(webhook, ends)).toEqual({ current: "whsec_new", previous: null });
    expect(liveSecrets(webhook, new Date(ends.getTime() + 86_400_000))).toEqual({ current: "whsec_new", previous: null });
  });

  it("has nothing to drop without a rotation, and never keeps a secret without an expiry", () => {
    const now = new Date();
    expect(liveSecrets({ secret: "a", previousSecret: null, previousSecretExpiresAt: null }, now)).toEqual({ current: "a", previous: null });
    expect(liveSecrets({ secret: "a", previousSecret: "b", previousSecretExpiresAt: null }, now)).toEqual({ current: "a", previous: null });
  });

  it("feeds signatureHeaders: Previous header only while live", () => {
    const sign = (now: Date) =>
      signatureHeaders({ body: "{}", eventId: "evt", eventType: "user.created", attempt: 1, timestamp: 1_795_300_000, secrets: liveSecrets(webhook, now) });
    expect(sign(new Date(ends.getTime() - 1000))).toHaveProperty("X-Service-Signature-Previous");
    const after = sign(new Date(ends.getTime() + 1000));
    expect(after).not.toHaveProperty("X-Service-Signature-Previous");
    expect(after["webhook-signature"].split(" ")).toHaveLength(1);
  });
});
