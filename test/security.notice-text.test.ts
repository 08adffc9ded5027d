// What a security notice repeats is sent under the service's name to somebody else (the
// account's other addresses): none of it may be words a caller chose, and one notice stays as
// short as a gathered one (src/auth/notices.ts MAX_GATHERED_LENGTH), whatever it names. Two ways
// past that: an external identity was named by its whole issuer (up to 2,048 characters, a path
// of any words, twice in each notice), and a client address was any word after an IPv6 zone's
// `%` (Node's isIP takes "fe80::1%call-1-900-…" of any length), which the "From:" line quoted.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { noticeText, type AccountChange } from "../src/auth/change-notices.ts";
import { gatherNotices, MAX_GATHERED_LENGTH } from "../src/auth/notices.ts";
import { normalize } from "../src/http/client-address.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { until } from "./support/receiver.ts";

const PLANTED = "call-1-900-555-0100-to-cancel";

/** The body of a raw e-mail as a person reads it (nodemailer sends non-ASCII text quoted-printable). */
function quotedPrintable(raw: string): string {
  const body = raw.replace(/=\r?\n/g, "");
  return Buffer.from(body.replace(/=([0-9A-F]{2})/g, (_, hex) => String.fromCharCode(parseInt(hex, 16))), "latin1").toString("utf8");
}

describe("one notice", () => {
  // the longest of each as stored: an issuer of 2,048 characters (src/auth/external/upstream.ts
  // storable), an address of 254, a phone; a client address as a forwarded hop spelled it
  const issuer = `https://login.example.com/realms/${PLANTED}/${"x".repeat(2048)}`.slice(0, 2048);
  const identifiers = [
    { kind: "external" as const, value: `${issuer}#${"s".repeat(255)}` },
    { kind: "email" as const, value: `a@${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(63)}.${"e".repeat(55)}.com` },
    { kind: "phone" as const, value: "+12025550143" },
  ];
  const changes: AccountChange[] = [
    ...identifiers.flatMap((identifier) => [
      { kind: "attached" as const, identifier },
      { kind: "merged" as const, identifier },
      { kind: "removed" as const, identifier },
    ]),
    { kind: "merged_away" },
    { kind: "unmerged", secondaryId: "acc_x" },
    { kind: "passkey_added", name: PLANTED },
    { kind: "passkey_removed", name: PLANTED },
  ];
  const hops = [`fe80::1%${PLANTED}`, `fe80::1%${PLANTED}-${"y".repeat(8000)}`, `[fe80::1%${PLANTED}]:443`, "203.0.113.7", "2001:db8::1"];

  it("names an external identity by its provider's host, and quotes no word of the issuer's path", () => {
    const { text } = noticeText({ kind: "attached", identifier: identifiers[0] }, new Date("2026-11-25T12:00:00Z"), "203.0.113.7");
    expect(text).toContain("an account at login.example.com,");
    expect(text).not.toContain(PLANTED);
    expect(text).not.toContain("realms");
  });

  it("takes an IPv6 zone for no part of the client's address", () => {
    expect(normalize(`fe80::1%${PLANTED}`)).toBe("fe80::1");
    expect(normalize(`[fe80::1%${PLANTED}]:443`)).toBe("fe80::1");
    expect(normalize("fe80::1%eth0")).toBe("fe80::1");
  });

  it("is no longer than a gathered notice, and repeats nothing a caller chose, whatever it names and whoever made it", () => {
    fc.assert(
      fc.property(fc.constantFrom(...changes), fc.constantFrom(...hops), (change, hop) => {
        const notice = noticeText(change, new Date("2026-11-25T12:00:00Z"), normalize(hop));
        expect(notice.text.length).toBeLessThanOrEqual(MAX_GATHERED_LENGTH);
        expect(notice.text).not.toContain(PLANTED);
        expect(notice.subject).not.toContain(PLANTED);
        // gathered with another, it keeps within its length as before
        expect(gatherNotices([notice, notice]).text.length).toBeLessThanOrEqual(MAX_GATHERED_LENGTH);
      }),
      { numRuns: 200 },
    );
  });
});

describe.concurrent.each(backends)("a notice's client address on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    // a client inside the trusted range: the hops left of it are its own words
    h = await startHarness(backend, { env: { LINKGATE_TRUSTED_PROXIES: "10.0.0.0/8" } });
  });
  afterAll(() => h?.close());

  it("is the address, never the words a client wrote after an IPv6 zone's %", async () => {
    const owner = await h.signIn({ email: "zone-owner@example.com" });
    const hop = `fe80::1%${PLANTED}-${"z".repeat(3000)}`;
    const headers = { authorization: `Bearer ${owner.token}`, "x-forwarded-for": hop };
    const req = await h.call("POST", "/users/link/request", { body: { email: "zone-added@example.com" }, headers, from: "10.0.0.9" });
    expect(req.status).toBe(200);
    const verify = await h.call("POST", "/users/link/verify", {
      body: { state_id: req.body.state_id, otp: await h.mailbox.otp("zone-added@example.com") },
      headers,
      from: "10.0.0.9",
    });
    expect(verify.body.outcome).toBe("attached");

    const notices = await until(
      () => h.mailbox.messages.filter((m) => m.to === "zone-owner@example.com" && /was added to your account/.test(m.subject ?? "")),
      (n) => n.length > 0,
    );
    const text = quotedPrintable(notices[0].text);
    expect(text).toContain("From: fe80::1.");
    expect(text).not.toContain(PLANTED);
    expect(text.length).toBeLessThanOrEqual(MAX_GATHERED_LENGTH);
  });
});
