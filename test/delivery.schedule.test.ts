import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { decide, maxAttempts, MAX_RETRY_AFTER_MS, parseRetryAfter, withJitter } from "../src/delivery/schedule.ts";

const DOCUMENTED = [10_000, 30_000, 60_000, 300_000, 1_800_000];
const NOW = Date.parse("2026-11-21T10:00:00Z");
const mid = () => 0.5; // no jitter
const low = () => 0; // -20 %
const high = () => 0.999999; // just under +20 %

describe("decide", () => {
  it("200, 201 and 202 succeed at any attempt", () => {
    for (const statusCode of [200, 201, 202]) {
      for (const attempt of [1, 3, 6]) expect(decide({ attempt, statusCode }, DOCUMENTED)).toEqual({ status: "succeeded" });
    }
  });

  it("other 2xx, 3xx (redirects are not followed), 4xx and 5xx are retried", () => {
    for (const statusCode of [204, 299, 301, 302, 307, 400, 401, 404, 409, 429, 500, 502, 503, 504]) {
      expect(decide({ attempt: 1, statusCode }, DOCUMENTED, { random: mid })).toEqual({ status: "pending", delayMs: 10_000 });
    }
  });

  it("410 stops retries, even on the first attempt", () => {
    expect(decide({ attempt: 1, statusCode: 410 }, DOCUMENTED)).toEqual({ status: "gone" });
  });

  it("no response (connection error, timeout) is retried", () => {
    expect(decide({ attempt: 2, statusCode: null }, DOCUMENTED, { random: mid })).toEqual({ status: "pending", delayMs: 30_000 });
  });

  it("follows the schedule after each failure and fails after the 6th attempt", () => {
    const delays = [1, 2, 3, 4, 5].map((attempt) => decide({ attempt, statusCode: 500 }, DOCUMENTED, { random: mid }));
    expect(delays).toEqual(DOCUMENTED.map((delayMs) => ({ status: "pending", delayMs })));
    expect(maxAttempts(DOCUMENTED)).toBe(6);
    expect(decide({ attempt: 6, statusCode: 500 }, DOCUMENTED, { random: mid })).toEqual({ status: "failed" });
    expect(decide({ attempt: 6, statusCode: null }, DOCUMENTED)).toEqual({ status: "failed" });
    // The last attempt still succeeds or is gone on its own merits.
    expect(decide({ attempt: 6, statusCode: 200 }, DOCUMENTED)).toEqual({ status: "succeeded" });
    expect(decide({ attempt: 6, statusCode: 410 }, DOCUMENTED)).toEqual({ status: "gone" });
  });

  it("applies ±20 % jitter", () => {
    expect(decide({ attempt: 1, statusCode: 500 }, DOCUMENTED, { random: low })).toEqual({ status: "pending", delayMs: 8_000 });
    expect(decide({ attempt: 1, statusCode: 500 }, DOCUMENTED, { random: high })).toEqual({ status: "pending", delayMs: 12_000 });
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (base, r) => {
        const d = withJitter(base, () => r);
        return d >= Math.floor(base * 0.8) && d <= Math.ceil(base * 1.2);
      }),
    );
  });

  it("honours Retry-After on 429 and 503 when it asks for longer", () => {
    expect(decide({ attempt: 1, statusCode: 429, retryAfter: "120" }, DOCUMENTED, { random: mid, nowMs: NOW })).toEqual({ status: "pending", delayMs: 120_000 });
    expect(decide({ attempt: 1, statusCode: 503, retryAfter: "120" }, DOCUMENTED, { random: mid, nowMs: NOW })).toEqual({ status: "pending", delayMs: 120_000 });
    // Shorter than the schedule: the schedule wins.
    expect(decide({ attempt: 3, statusCode: 429, retryAfter: "5" }, DOCUMENTED, { random: mid, nowMs: NOW })).toEqual({ status: "pending", delayMs: 60_000 });
    // Only on 429/503.
    expect(decide({ attempt: 1, statusCode: 500, retryAfter: "120" }, DOCUMENTED, { random: mid, nowMs: NOW })).toEqual({ status: "pending", delayMs: 10_000 });
    // An HTTP date.
    const date = new Date(NOW + 90_000).toUTCString();
    expect(decide({ attempt: 1, statusCode: 503, retryAfter: date }, DOCUMENTED, { random: mid, nowMs: NOW })).toEqual({ status: "pending", delayMs: 90_000 });
    // Capped at one hour.
    expect(decide({ attempt: 1, statusCode: 429, retryAfter: "86400" }, DOCUMENTED, { random: mid, nowMs: NOW })).toEqual({ status: "pending", delayMs: MAX_RETRY_AFTER_MS });
    // It does not add attempts: the 6th failure is final whatever the header says.
    expect(decide({ attempt: 6, statusCode: 429, retryAfter: "10" }, DOCUMENTED, { nowMs: NOW })).toEqual({ status: "failed" });
  });

  it("works with a shortened schedule (tests use one)", () => {
    const short = [50, 100];
    expect(maxAttempts(short)).toBe(3);
    expect(decide({ attempt: 2, statusCode: 500 }, short, { random: mid })).toEqual({ status: "pending", delayMs: 100 });
    expect(decide({ attempt: 3, statusCode: 500 }, short, { random: mid })).toEqual({ status: "failed" });
  });
});

describe("parseRetryAfter", () => {
  it("reads delay-seconds and HTTP dates", () => {
    expect(parseRetryAfter("0", NOW)).toBe(0);
    expect(parseRetryAfter(" 7 ", NOW)).toBe(7_000);
    expect(parseRetryAfter("Sat, 21 Nov 2026 10:01:00 GMT", NOW)).toBe(60_000);
    expect(parseRetryAfter("Saturday, 21-Nov-26 10:01:00 GMT", NOW)).toBe(60_000);
  });

  it("treats past dates as now and caps at one hour", () => {
    expect(parseRetryAfter("Sat, 21 Nov 2026 09:00:00 GMT", NOW)).toBe(0);
    expect(parseRetryAfter("999999999", NOW)).toBe(MAX_RETRY_AFTER_MS);
  });

  it("ignores what it cannot read", () => {
    for (const v of [undefined, null, "", "soon", "-5", "1.5", "tomorrow at noon"]) expect(parseRetryAfter(v, NOW)).toBeNull();
  });
});
