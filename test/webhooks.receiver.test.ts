import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { generateWebhookSecret } from "../src/webhooks/secrets.ts";
import { signatureHeaders } from "../src/webhooks/signing.ts";
import { verifyWebhook, WebhookVerificationError } from "../src/webhooks/receiver.ts";

const OLD = generateWebhookSecret();
const NEW = generateWebhookSecret();
const T = 1_795_300_000;
const now = () => T * 1000;
const body = JSON.stringify({ id: "evt_1", event_type: "user.created", created_at: "2026-11-21T10:00:00.123456789Z", project_id: "prj_1", data: {} });

function sign(b: string | Buffer, current: string, previous?: string, timestamp = T) {
  return signatureHeaders({ body: b, eventId: "evt_1", eventType: "user.created", attempt: 1, timestamp, secrets: { current, previous } });
}
/** Only the headers of one scheme, to test each on its own. */
function only(headers: Record<string, string>, scheme: "legacy" | "standard") {
  return Object.fromEntries(Object.entries(headers).filter(([k]) => k.startsWith("webhook-") === (scheme === "standard")));
}

describe("verifyWebhook", () => {
  it("accepts a delivery signed with the receiver's secret and parses the envelope", () => {
    const r = verifyWebhook(body, sign(body, NEW), NEW, { now });
    expect(r).toMatchObject({ ok: true, secretIndex: 0, scheme: "standard", envelope: { id: "evt_1" } });
  });

  for (const scheme of ["legacy", "standard", "any"] as const) {
    for (const held of [["old only", [OLD]], ["new only", [NEW]], ["both", [OLD, NEW]]] as const) {
      it(`${scheme}: during a transition a receiver holding the ${held[0]} secret verifies`, () => {
        const r = verifyWebhook(body, sign(body, NEW, OLD), [...held[1]], { now, scheme });
        expect(r.ok).toBe(true);
      });
    }
  }

  it("accepts each scheme's headers alone under `any`", () => {
    const h = sign(body, NEW, OLD);
    expect(verifyWebhook(body, only(h, "legacy"), OLD, { now, scheme: "any" })).toMatchObject({ ok: true, scheme: "legacy" });
    expect(verifyWebhook(body, only(h, "standard"), OLD, { now, scheme: "any" })).toMatchObject({ ok: true, scheme: "standard" });
  });

  // tenth review: under a default of `any`, a captured delivery replayed without its webhook-*
  // headers (or with an unknown signature version) fell back to the legacy header, which has no
  // timestamp, and verified forever
  it("by default verifies Standard Webhooks only: an old delivery replayed without its webhook-* headers is refused", () => {
    const old = sign(body, NEW, undefined, T - 3600);
    const stripped = only(old, "legacy");
    const unknownVersion = { ...old, "webhook-signature": "v2,xx" };
    for (const headers of [stripped, unknownVersion]) {
      const r = verifyWebhook(body, headers, NEW, { now });
      expect(r.ok).toBe(false);
      if (!r.ok) expect([r.error.code, r.error.status]).toEqual(["missing_signature", 400]);
    }
    expect(verifyWebhook(body, old, NEW, { now })).toMatchObject({ ok: false, error: { code: "timestamp_out_of_tolerance" } });
    expect(verifyWebhook(body, sign(body, NEW), NEW, { now })).toMatchObject({ ok: true, scheme: "standard" });
  });

  it("rejects a secret that is not live in the delivery", () => {
    const r = verifyWebhook(body, sign(body, NEW), OLD, { now });
    expect(r.ok).toBe(false);
    if (!r.ok) expect([r.error.code, r.error.status]).toEqual(["invalid_signature", 401]);
  });

  for (const scheme of ["legacy", "standard", "any"] as const) {
    it(`${scheme}: rejects a tampered body with 401`, () => {
      const r = verifyWebhook(body.replace("evt_1", "evt_2"), sign(body, NEW), NEW, { now, scheme });
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.error).toBeInstanceOf(WebhookVerificationError);
        expect([r.error.code, r.error.status]).toEqual(["invalid_signature", 401]);
      }
    });
  }

  it("rejects missing headers with 400", () => {
    for (const [headers, scheme] of [
      [{}, "any"],
      [only(sign(body, NEW), "standard"), "legacy"],
      [only(sign(body, NEW), "legacy"), "standard"],
      [{ "webhook-id": "evt_1", "webhook-signature": sign(body, NEW)["webhook-signature"] }, "standard"],
    ] as const) {
      const r = verifyWebhook(body, headers, NEW, { now, scheme });
      expect(r.ok).toBe(false);
      if (!r.ok) expect([r.error.code, r.error.status]).toEqual(["missing_signature", 400]);
    }
  });

  it("rejects a stale or future standard timestamp with 401, within tolerance accepts", () => {
    const stale = sign(body, NEW, undefined, T - 301);
    const r = verifyWebhook(body, stale, NEW, { now });
    expect(r.ok).toBe(false);
    if (!r.ok) expect([r.error.code, r.error.status]).toEqual(["timestamp_out_of_tolerance", 401]);
    expect(verifyWebhook(body, sign(body, NEW, undefined, T + 301), NEW, { now }).ok).toBe(false);
    expect(verifyWebhook(body, sign(body, NEW, undefined, T - 299), NEW, { now }).ok).toBe(true);
    expect(verifyWebhook(body, stale, NEW, { now, toleranceSeconds: 600 }).ok).toBe(true);
  });

  it("does not fall back to the legacy header to rescue a replayed delivery", () => {
    const r = verifyWebhook(body, sign(body, NEW, undefined, T - 3600), NEW, { now, scheme: "any" });
    expect(r.ok).toBe(false);
  });

  it("looks headers up case-insensitively, from a Headers object or a record with arrays", () => {
    const h = sign(body, NEW, OLD);
    const upper = Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toUpperCase(), v]));
    expect(verifyWebhook(body, upper, OLD, { now }).ok).toBe(true);
    expect(verifyWebhook(body, new Headers(h), OLD, { now }).ok).toBe(true);
    const legacy = only(h, "legacy");
    const arr = { "x-service-signature": [legacy["X-Service-Signature"], legacy["X-Service-Signature-Previous"]] };
    expect(verifyWebhook(body, arr, OLD, { now, scheme: "legacy" }).ok).toBe(true);
  });

  it("accepts Buffer and Uint8Array bodies", () => {
    const h = sign(body, NEW);
    const buf = Buffer.from(body);
    expect(verifyWebhook(buf, h, NEW, { now }).ok).toBe(true);
    expect(verifyWebhook(new Uint8Array(buf), h, NEW, { now }).ok).toBe(true);
  });

  it("reports an authentic but non-JSON body as invalid_body (400)", () => {
    const r = verifyWebhook("not json", sign("not json", NEW), NEW, { now });
    expect(r.ok).toBe(false);
    if (!r.ok) expect([r.error.code, r.error.status]).toEqual(["invalid_body", 400]);
  });

  it("does not throw on malformed signature values", () => {
    const h = { ...sign(body, NEW), "X-Service-Signature": "sha256=zz", "webhook-signature": "v1, v2,abc v1,=" };
    expect(verifyWebhook(body, h, NEW, { now }).ok).toBe(false);
    expect(verifyWebhook(body, h, NEW, { now, scheme: "legacy" }).ok).toBe(false);
  });

  it("refuses to run without a secret", () => {
    expect(() => verifyWebhook(body, sign(body, NEW), [])).toThrow(TypeError);
  });
});

describe("verifyWebhook properties", () => {
  // 16 bytes is the shortest key verifyWebhook takes; linkgate makes 32.
  const secretArb = fc.uint8Array({ minLength: 16, maxLength: 64 }).map((b) => "whsec_" + Buffer.from(b).toString("base64"));
  const bodyArb = fc.jsonValue().map((v) => JSON.stringify({ id: "evt", data: v }));

  it("round-trips sign → verify for random bodies and secrets, under every scheme", () => {
    fc.assert(
      fc.property(bodyArb, secretArb, secretArb, fc.constantFrom("legacy", "standard", "any" as const), (b, cur, prev, scheme) => {
        const h = sign(b, cur, prev);
        const mine = verifyWebhook(b, h, cur, { now, scheme });
        const theirs = verifyWebhook(Buffer.from(b), h, prev, { now, scheme });
        return mine.ok && theirs.ok && JSON.stringify(mine.envelope) === JSON.stringify(JSON.parse(b));
      }),
    );
  });

  it("fails when any single byte of the body changes", () => {
    fc.assert(
      fc.property(bodyArb, secretArb, fc.nat(), fc.integer({ min: 1, max: 255 }), fc.constantFrom("legacy", "standard" as const), (b, secret, pos, delta, scheme) => {
        const bytes = Buffer.from(b);
        const h = sign(bytes, secret);
        const tampered = Buffer.from(bytes);
        const i = pos % tampered.length;
        tampered[i] = (tampered[i] + delta) % 256;
        const r = verifyWebhook(tampered, h, secret, { now, scheme });
        return !r.ok && r.error.code === "invalid_signature";
      }),
    );
  });
});

describe("the test vectors shipped in packages/receiver", () => {
  const vectors = JSON.parse(readFileSync(new URL("../packages/receiver/vectors/webhook-signatures.json", import.meta.url), "utf8")) as {
    cases: { name: string; body: string; webhook_id: string; webhook_timestamp: string; current_secret: string; previous_secret: string; headers_outside_transition: Record<string, string>; headers_during_transition: Record<string, string> }[];
  };

  it.each(vectors.cases)("$name: linkgate signs exactly the vector's headers, and the receiver verifies them with either secret", (v) => {
    const at = Number(v.webhook_timestamp);
    const common = { "webhook-id": v.webhook_id, "webhook-timestamp": v.webhook_timestamp };
    const signed = (previous?: string) =>
      signatureHeaders({ body: v.body, eventId: v.webhook_id, eventType: "user.created", attempt: 1, timestamp: at, secrets: { current: v.current_secret, previous } });
    const pick = (h: Record<string, string>) => Object.fromEntries(Object.keys(v.headers_during_transition).map((k) => [k, h[k]]).filter(([, x]) => x !== undefined));
    expect(pick(signed())).toEqual(v.headers_outside_transition);
    expect(pick(signed(v.previous_secret))).toEqual(v.headers_during_transition);

    const nowMs = () => at * 1000;
    for (const scheme of ["legacy", "standard"] as const) {
      expect(verifyWebhook(v.body, { ...common, ...v.headers_outside_transition }, v.current_secret, { now: nowMs, scheme })).toMatchObject({ ok: true, scheme });
      expect(verifyWebhook(v.body, { ...common, ...v.headers_outside_transition }, v.previous_secret, { now: nowMs, scheme }).ok).toBe(false);
      for (const held of [[v.current_secret], [v.previous_secret], [v.previous_secret, v.current_secret]]) {
        // The first secret in the list given that matches any signature.
        const r = verifyWebhook(v.body, { ...common, ...v.headers_during_transition }, held, { now: nowMs, scheme });
        expect(r).toMatchObject({ ok: true, scheme, secretIndex: 0 });
        expect(r.ok && r.secretUsed).toBe(held[0]);
      }
      expect(verifyWebhook(v.body + " ", { ...common, ...v.headers_during_transition }, v.current_secret, { now: nowMs, scheme }).ok).toBe(false);
    }
  });
});
