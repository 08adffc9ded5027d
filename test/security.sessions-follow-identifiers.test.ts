// A session ends when what it signed in with leaves the account: an identifier it got a code at,
// or a passkey (docs/security.md, "Stolen sessions"). Someone who held a recent session could
// attach or merge an address, or register a passkey, of their own, sign in with it, and keep that
// session after the owner removed it or unmerged: the session kept reading the owner's account.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { PASSKEY_ORIGIN, passkeyAssertion, registerPasskey, signInWithPasskey } from "./support/passkeys.ts";

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

  it("removing a passkey ends the sessions it signed in, and an unmerge ends those of the secondary's passkeys", async () => {
    const owner = await h.signIn({ email: "owner.four@example.com" });
    const intruderKey = new SoftAuthenticator(PASSKEY_ORIGIN);
    const passkeyId = await registerPasskey(h, owner.token, intruderKey);
    const intruder = await signInWithPasskey(h, intruderKey);
    expect(await viewerOf(intruder)).toBe(owner.accountId);
    const removed = await h.gql(`mutation($id: ID!) { removePasskey(id: $id) { __typename } }`, { id: passkeyId }, bearer(owner.token));
    expect(removed.body.errors).toBeUndefined();
    expect(await viewerOf(intruder)).toBeNull();
    expect(await viewerOf(owner.token)).toBe(owner.accountId);

    const secondary = await h.signIn({ email: "merged.four@example.com" });
    const secondaryKey = new SoftAuthenticator(PASSKEY_ORIGIN);
    await registerPasskey(h, secondary.token, secondaryKey);
    expect(await link(owner.token, "merged.four@example.com")).toBe("merged");
    const throughSecondaryKey = await signInWithPasskey(h, secondaryKey);
    expect(await viewerOf(throughSecondaryKey)).toBe(owner.accountId);
    expect((await h.gql("mutation { unmerge { __typename } }", {}, bearer(owner.token))).body.errors).toBeUndefined();
    expect(await viewerOf(throughSecondaryKey)).toBeNull();
    expect(await viewerOf(owner.token)).toBe(owner.accountId);
  });

  it("a session that re-authenticated with a passkey ends when the passkey is removed", async () => {
    const owner = await h.signIn({ email: "owner.five@example.com" });
    const stolen = await h.signIn({ email: "owner.five@example.com" });
    const key = new SoftAuthenticator(PASSKEY_ORIGIN);
    const passkeyId = await registerPasskey(h, stolen.token, key);
    const again = await h.gql(
      `mutation($r: JSON!) { reauthenticateWithPasskey(response: $r) { ... on SignInTokens { accessToken } } }`,
      { r: await passkeyAssertion(h, key) },
      bearer(stolen.token),
    );
    const refreshed = again.body.data.reauthenticateWithPasskey.accessToken;
    expect(await viewerOf(refreshed)).toBe(owner.accountId);

    const removed = await h.gql(`mutation($id: ID!) { removePasskey(id: $id) { __typename } }`, { id: passkeyId }, bearer(owner.token));
    expect(removed.body.errors).toBeUndefined();
    expect(await viewerOf(refreshed)).toBeNull();
    expect(await viewerOf(owner.token)).toBe(owner.accountId);
  });

  it("a re-authentication code to an address the owner removed re-authenticates nothing, even once someone holds the address again", async () => {
    const owner = await h.signIn({ email: "owner.six@example.com" });
    const stolen = await h.signIn({ email: "owner.six@example.com" });
    expect(await link(stolen.token, "intruder.six@example.com")).toBe("attached");
    const start = await h.call("POST", "/auth/reauthenticate/start", { body: { email: "intruder.six@example.com" }, headers: bearer(stolen.token) });
    expect(start.status).toBe(200);
    const kept = await h.mailbox.otp("intruder.six@example.com");

    expect((await h.call("POST", "/users/link/remove", { body: { email: "intruder.six@example.com" }, headers: bearer(owner.token) })).status).toBe(200);
    await h.signIn({ email: "intruder.six@example.com" }); // an account of its own now
    const verify = await h.call("POST", "/auth/reauthenticate/verify", { body: { state_id: start.body.state_id, otp: kept }, headers: bearer(stolen.token) });
    expect(verify.status).toBe(400);
    expect(verify.body.error).toBe("OTPInvalid");
  });

  it("leaves the session that removes the address it signed in with", async () => {
    const owner = await h.signIn({ email: "owner.three@example.com" });
    expect(await link(owner.token, "owner.three.new@example.com")).toBe("attached");
    const removed = await h.call("POST", "/users/link/remove", { body: { email: "owner.three@example.com" }, headers: bearer(owner.token) });
    expect(removed.status).toBe(200);
    expect(await viewerOf(owner.token)).toBe(owner.accountId);
  });
});
