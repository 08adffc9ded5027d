// A retried confirmation of an external sign-in (docs/external-identities.md): when the provider
// names a verified e-mail an account holds, the user proves the e-mail with its code or with a
// passkey of that account, and a retry of a confirmation that succeeded answers the same
// sign-in. The passkey path answered that retry to any passkey of the project: a stranger with
// the victim's state id and a passkey of their own account got the victim's session.
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { backends } from "./support/db.ts";
import { ORIGIN } from "./support/oidc.ts";
import { confirm, externalSignIn, externalWorldFor } from "./support/upstream-linkgate.ts";

const tag = randomBytes(3).toString("hex");

describe.each(backends)("a retried external confirmation on %s", (backend) => {
  const world = externalWorldFor(backend, "https://app.example/after-sign-in");

  async function withPasskey(email: string) {
    const { h } = world;
    const user = await h.signIn({ email });
    const device = new SoftAuthenticator(ORIGIN);
    const headers = { authorization: `Bearer ${user.token}`, "x-api-key": h.publishableKey };
    const options = await h.call("POST", "/auth/passkey/registration/options", { headers });
    const registered = await h.call("POST", "/auth/passkey/registration/verify", { body: { response: device.create(options.body), name: "Laptop" }, headers });
    expect(registered.status, JSON.stringify(registered.body)).toBe(200);
    const assertion = async () => device.get((await h.call("POST", "/auth/passkey/sign-in/options", { body: {}, headers: { "x-api-key": h.publishableKey } })).body);
    return { ...user, assertion };
  }

  it("answers the stored sign-in only to a passkey of the account it signed in to", async () => {
    const { h, google, app } = world;
    const ada = await withPasskey(`ada-${tag}@example.com`);
    google.loginAs({ sub: `g-ada-${tag}`, email: `ada-${tag}@example.com`, email_verified: true, name: "Ada" });
    const asked = await externalSignIn(h, google, "google", app.redirectUri);
    expect(asked.body.verification_required).toBe("email");
    const confirmed = await confirm(h, asked.body.state_id, await h.mailbox.otp(`ada-${tag}@example.com`));
    expect(confirmed.body.account_id).toBe(ada.accountId);

    const mallory = await withPasskey(`mallory-${tag}@example.com`);
    const stolen = await h.call("POST", "/auth/external/confirm/passkey", { body: { state_id: asked.body.state_id, response: await mallory.assertion() } });
    expect(stolen.status).toBe(400);
    expect(stolen.body).toEqual({ error: "PasskeyInvalid", message: expect.any(String) });
    expect(stolen.body.access_token).toBeUndefined();

    // Ada's own passkey gets her sign-in again, as any retry does
    const retried = await h.call("POST", "/auth/external/confirm/passkey", { body: { state_id: asked.body.state_id, response: await ada.assertion() } });
    expect(retried.status, JSON.stringify(retried.body)).toBe(200);
    expect(retried.body.account_id).toBe(ada.accountId);
  });

  // A retry answers the same sign-in "while the state lives" (docs/external-identities.md), and a
  // retry with the code answers nothing once that session has ended: the passkey's answered
  // fresh tokens for the ended session all the same, as if it lived.
  it("answers a retry with the passkey after the session ended as the code's retry: the session has ended", async () => {
    const { h, google, app } = world;
    const ada = await withPasskey(`ended-${tag}@example.com`);
    google.loginAs({ sub: `g-ended-${tag}`, email: `ended-${tag}@example.com`, email_verified: true, name: "Ada" });
    const asked = await externalSignIn(h, google, "google", app.redirectUri);
    const confirmed = await h.call("POST", "/auth/external/confirm/passkey", { body: { state_id: asked.body.state_id, response: await ada.assertion() } });
    expect(confirmed.status, JSON.stringify(confirmed.body)).toBe(200);
    const out = await h.gql(`mutation { signOut }`, {}, { authorization: `Bearer ${confirmed.body.access_token}` });
    expect(out.body.errors, JSON.stringify(out.body)).toBeUndefined();

    const retried = await h.call("POST", "/auth/external/confirm/passkey", { body: { state_id: asked.body.state_id, response: await ada.assertion() } });
    expect(retried.body.access_token).toBeUndefined();
    expect(retried.status, JSON.stringify(retried.body)).toBe(401);
  });
});
