// A session opened with a code sent to an identifier ends when that identifier leaves the
// account (docs/security.md, "Stolen sessions"). Someone who held a recent session could attach
// or merge an address of their own, sign in with it, and keep that session after the owner
// removed the address or unmerged: the session kept reading the owner's account.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

describe.each(backends)("sessions that follow their identifier on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const viewerOf = async (token: string) => (await h.gql("{ viewer { id } }", {}, bearer(token))).body.data?.viewer?.id ?? null;

  async function link(token: string, email: string): Promise<string> {
    const req = await h.call("POST", "/users/link/request", { body: { email }, headers: bearer(token) });
    expect(req.status).toBe(200);
    const verify = await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp: await h.mailbox.otp(email) }, headers: bearer(token) });
    expect(verify.status).toBe(200);
    return verify.body.outcome;
  }

  it("removing an attached address ends the sessions it opened, and no other", async () => {
    const owner = await h.signIn({ email: "owner.one@example.com" });
    expect(await link(owner.token, "intruder.one@example.com")).toBe("attached");
    const intruder = await h.signIn({ email: "intruder.one@example.com" });
    const ownerElsewhere = await h.signIn({ email: "owner.one@example.com" });
    expect(await viewerOf(intruder.token)).toBe(owner.accountId);

    const removed = await h.call("POST", "/users/link/remove", { body: { email: "intruder.one@example.com" }, headers: bearer(owner.token) });
    expect(removed.status).toBe(200);
    expect(await viewerOf(intruder.token)).toBeNull();
    expect(await viewerOf(owner.token)).toBe(owner.accountId);
    expect(await viewerOf(ownerElsewhere.token)).toBe(owner.accountId);
  });

  it("an unmerge ends the primary's sessions opened with the secondary's addresses", async () => {
    const secondary = await h.signIn({ email: "merged.two@example.com" });
    const owner = await h.signIn({ email: "owner.two@example.com" });
    expect(await link(owner.token, "merged.two@example.com")).toBe("merged");
    expect(await viewerOf(secondary.token)).toBeNull(); // a merge ends the secondary's own sessions
    const throughSecondary = await h.signIn({ email: "merged.two@example.com" });
    expect(await viewerOf(throughSecondary.token)).toBe(owner.accountId);

    const unmerged = await h.gql("mutation { unmerge { __typename } }", {}, bearer(owner.token));
    expect(unmerged.body.errors).toBeUndefined();
    expect(await viewerOf(throughSecondary.token)).toBeNull();
    expect(await viewerOf(owner.token)).toBe(owner.accountId);
    // the secondary is its own account again, and signs in to it
    expect(await viewerOf((await h.signIn({ email: "merged.two@example.com" })).token)).toBe(secondary.accountId);
  });

  it("leaves the session that removes the address it signed in with", async () => {
    const owner = await h.signIn({ email: "owner.three@example.com" });
    expect(await link(owner.token, "owner.three.new@example.com")).toBe("attached");
    const removed = await h.call("POST", "/users/link/remove", { body: { email: "owner.three@example.com" }, headers: bearer(owner.token) });
    expect(removed.status).toBe(200);
    expect(await viewerOf(owner.token)).toBe(owner.accountId);
  });
});
