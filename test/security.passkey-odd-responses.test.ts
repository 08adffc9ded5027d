// Passkey responses no browser makes, sent by anyone with the publishable key (or their own
// session): each is refused as `PasskeyInvalid` (docs/authentication.md, "Signing in with a
// passkey"), never a 500. The challenge in clientDataJSON is the client's word: one with a NUL
// reached the challenge lookup, which Postgres refuses, in sign-in, re-authentication, an external
// sign-in's confirmation and registration alike. A registration's credential id is the
// authenticator's word too: one past the 1023 bytes WebAuthn allows did not fit the unique index
// on (project_id, credential_id).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { PASSKEY_ORIGIN, registerPasskey } from "./support/passkeys.ts";

describe.each(backends)("odd passkey responses on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const signInOptions = async () => (await h.call("POST", "/auth/passkey/sign-in/options", { headers: { "x-api-key": h.publishableKey } })).body;
  const registrationOptions = async (token: string) =>
    (await h.call("POST", "/auth/passkey/registration/options", { headers: { ...bearer(token), "x-api-key": h.publishableKey } })).body;

  it("a challenge with a NUL in it: PasskeyInvalid in every ceremony, over REST and GraphQL", async () => {
    const user = await h.signIn({ email: "nul-challenge@example.com" });
    const auth = new SoftAuthenticator(PASSKEY_ORIGIN);
    await registerPasskey(h, user.token, auth);
    const sessions = await h.db.prisma.session.count();
    const odd = async () => auth.get(await signInOptions(), undefined, { challenge: "abc\u0000def" });

    const asProject = { "x-api-key": h.publishableKey };
    const asUser = { ...bearer(user.token), "x-api-key": h.publishableKey };
    for (const [path, headers, extra] of [
      ["/auth/passkey/sign-in/verify", asProject, {}],
      ["/auth/reauthenticate/passkey", asUser, {}],
      ["/auth/external/confirm/passkey", asProject, { state_id: "otp_none" }],
    ] as const) {
      const r = await h.call("POST", path, { body: { response: await odd(), ...extra }, headers });
      expect({ path, status: r.status, error: r.body.error }).toEqual({ path, status: 400, error: "PasskeyInvalid" });
    }
    const g = await h.gql(`mutation($r: JSON!) { finishPasskeySignIn(response: $r) { __typename } }`, { r: await odd() }, asProject);
    expect(g.body).toEqual({ data: { finishPasskeySignIn: { __typename: "PasskeyInvalid" } } });

    const created = new SoftAuthenticator(PASSKEY_ORIGIN).create(await registrationOptions(user.token), { challenge: "abc\u0000def" });
    const reg = await h.call("POST", "/auth/passkey/registration/verify", { body: { response: created }, headers: asUser });
    expect([reg.status, reg.body.error]).toEqual([400, "PasskeyInvalid"]);

    expect(await h.db.prisma.session.count()).toBe(sessions);
    // the passkey still signs in
    const ok = await h.call("POST", "/auth/passkey/sign-in/verify", { body: { response: auth.get(await signInOptions()) }, headers: asProject });
    expect(ok.body.account_id).toBe(user.accountId);
  });

  it("a credential id longer than 1023 bytes is PasskeyInvalid and stores nothing; one of 1023 bytes registers and signs in", async () => {
    const user = await h.signIn({ email: "long-credential@example.com" });
    const headers = { ...bearer(user.token), "x-api-key": h.publishableKey };
    const register = async (bytes: number) => {
      const auth = new SoftAuthenticator(PASSKEY_ORIGIN);
      const response = auth.create(await registrationOptions(user.token), { credentialIdBytes: bytes });
      return { auth, r: await h.call("POST", "/auth/passkey/registration/verify", { body: { response }, headers }) };
    };

    for (const bytes of [4000, 1024]) {
      const { r } = await register(bytes);
      expect({ bytes, status: r.status, error: r.body.error }).toEqual({ bytes, status: 400, error: "PasskeyInvalid" });
    }
    expect(await h.db.prisma.passkey.count({ where: { accountId: user.accountId } })).toBe(0);

    const { auth, r } = await register(1023);
    expect(r.status).toBe(200);
    const signedIn = await h.call("POST", "/auth/passkey/sign-in/verify", { body: { response: auth.get(await signInOptions()) }, headers: { "x-api-key": h.publishableKey } });
    expect(signedIn.body.account_id).toBe(user.accountId);
  });
});
