// A gathered notice (src/auth/notices.ts gatherNotices) is one message for every change a budget
// held back: whatever the number and mix of changes, it names each kind of change and stays
// within its length, so a burst of changes cannot turn into an over-long text.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { noticeText, type AccountChange } from "../src/auth/change-notices.ts";
import { gatherNotices, MAX_GATHERED_LENGTH } from "../src/auth/notices.ts";

const identifier = fc.oneof(
  fc.emailAddress().map((value) => ({ kind: "email" as const, value })),
  fc.integer({ min: 10_000_000, max: 99_999_999 }).map((n) => ({ kind: "phone" as const, value: `+1202${n}` })),
  fc.webUrl().map((issuer) => ({ kind: "external" as const, value: `${issuer}#1234567890` })),
);

const change: fc.Arbitrary<AccountChange> = fc.oneof(
  identifier.map((i) => ({ kind: "attached" as const, identifier: i })),
  identifier.map((i) => ({ kind: "merged" as const, identifier: i })),
  identifier.map((i) => ({ kind: "removed" as const, identifier: i })),
  fc.constant({ kind: "merged_away" as const }),
  fc.constant({ kind: "unmerged" as const, secondaryId: "acc_x" }),
  fc.constant({ kind: "passkey_added" as const }),
  fc.constant({ kind: "passkey_removed" as const }),
);

describe("a gathered notice", () => {
  it("names every kind of change and stays within its length, for any number and mix of changes", () => {
    fc.assert(
      fc.property(fc.array(change, { minLength: 2, maxLength: 60 }), fc.ipV4(), (changes, address) => {
        const notices = changes.map((c) => noticeText(c, new Date("2026-11-25T12:00:00Z"), address));
        const { subject, text } = gatherNotices(notices);
        expect(text.length).toBeLessThanOrEqual(MAX_GATHERED_LENGTH);
        for (const n of notices) expect(subject.toLowerCase()).toContain(n.subject.slice(1).toLowerCase());
        expect(text).toContain(`${notices.length} changes were made to your account`);
        expect(text).toContain("If this was you, there is nothing to do.");
      }),
      { numRuns: 300 },
    );
  });

  it("spells out the first changes with their own advice when they fit", () => {
    const at = new Date("2026-11-25T12:00:00Z");
    const notices = [noticeText({ kind: "passkey_added" }, at, "203.0.113.9"), noticeText({ kind: "passkey_removed" }, at, "203.0.113.9")];
    const { text } = gatherNotices(notices);
    expect(text).toContain("A passkey was added to your account. It can sign in to your account.");
    expect(text).toContain("If it was not you: sign in, end your other sessions, and remove the passkey.");
    expect(text).not.toContain("more change");
  });
});
