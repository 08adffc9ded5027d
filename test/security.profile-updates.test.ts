// A signed-in account cannot flood the project's webhooks with user.updated (docs/security.md,
// "Abuse limits"): every name change is an event to every subscribed webhook, retried until
// received, and one account made 303 of them in 15 s with 30 aliased mutations a request.
// Name changes are bounded per account, and a name that does not change emits nothing.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROFILE_UPDATES_PER_ACCOUNT } from "../src/auth/profile.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

describe.each(backends)("profile updates on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const updatedEvents = (accountId: string) =>
    h.db.prisma.outboxEvent.count({ where: { eventType: "user.updated", body: { contains: `"user_id":"${accountId}"` } } });
  /** One request holding `names.length` aliased updateProfile mutations, run in order. */
  async function rename(token: string, names: string[]) {
    const fields = names.map((n, i) => `u${i}: updateProfile(name: ${JSON.stringify(n)}) { __typename ... on Account { name } ... on RateLimited { retryAfterSeconds } }`);
    const res = await h.gql(`mutation { ${fields.join(" ")} }`, {}, { authorization: `Bearer ${token}` });
    expect(res.body.errors).toBeUndefined();
    return names.map((_, i) => res.body.data[`u${i}`]);
  }

  it("emits user.updated only when the name changes, and takes 30 changes in 10 minutes per account", async () => {
    expect(PROFILE_UPDATES_PER_ACCOUNT).toEqual({ max: 30, windowSeconds: 600 });
    const user = await h.signIn({ email: "renames-a-lot@example.com" });
    const before = await updatedEvents(user.accountId);

    const same = await rename(user.token, ["Ada", " Ada ", "", "  "]);
    expect(same.map((r) => r.name)).toEqual(["Ada", "Ada", null, null]);
    expect(await updatedEvents(user.accountId)).toBe(before + 2);

    const names = Array.from({ length: 27 }, (_, i) => `Name ${i}`);
    const results = await rename(user.token, names);
    expect(results.slice(0, 26).map((r) => r.name)).toEqual(names.slice(0, 26));
    expect(results[26]).toEqual({ __typename: "RateLimited", retryAfterSeconds: expect.any(Number) });
    expect(await updatedEvents(user.accountId)).toBe(before + 2 + 26);
    const stored = await h.db.prisma.account.findUniqueOrThrow({ where: { id: user.accountId } });
    expect(stored.name).toBe("Name 25");

    // another account at the same address still renames
    const other = await h.signIn({ email: "renames-once@example.com" });
    expect(await rename(other.token, ["Bea"])).toEqual([{ __typename: "Account", name: "Bea" }]);
  });
});
