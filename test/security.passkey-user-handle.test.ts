// A passkey assertion's userHandle (docs/authentication.md, passkeys): the authenticator gives
// back the user.id of the registration, the registering account's id, and WebAuthn (§7.2, step
// 6) has the relying party refuse one that names anyone else. linkgate never compared it: an
// assertion answering for another account signed in, re-authenticated and confirmed an external
// sign-in like any other. The handle is outside the signature, so these tests rewrite it on real
// assertions. Passkeys from before linkgate stored the registering account are checked against
// what their rows can still tell: one an earlier build's unmerge moved to the secondary keeps the
// primary's id, and signs in with it.
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { backends } from "./support/db.ts";
import { ORIGIN } from "./support/oidc.ts";
import { externalSignIn, externalWorldFor } from "./support/upstream-linkgate.ts";

const tag = randomBytes(3).toString("hex");
let seq = 0;
const email = (name: string) => `${name}-${tag}-${++seq}@example.com`;

/** What an authenticator gives as userHandle for a user.id of these UTF-8 bytes. */
const handleOf = (id: string) => Buffer.from(id, "utf8").toString("base64url");

/** The assertion with another userHandle, or none (`undefined`): its signature still verifies. */
function withHandle(assertion: any, handle: string | undefined) {
  const response = { ...assertion.response };
  if (handle === undefined) delete response.userHandle;
  else response.userHandle = handle;
  return { ...assertion, response };
}

type Res = { status: number; body: any };

describe.each(backends)("a passkey assertion's user handle on %s", (backend) => {
  const world = externalWorldFor(backend, "https://app.example/after-sign-in");
  const { h } = world;

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const app = () => ({ "x-api-key": h.publishableKey });
  const viewerOf = async (token: string) => (await h.gql("{ viewer { id } }", {}, bearer(token))).body.data?.viewer?.id ?? null;

  /** `token`'s account registers a passkey on a new authenticator. */
  async function register(token: string) {
    const device = new SoftAuthenticator(ORIGIN);
    const headers = { ...bearer(token), "x-api-key": h.publishableKey };
    const options = await h.call("POST", "/auth/passkey/registration/options", { headers });
    expect(options.status, JSON.stringify(options.body)).toBe(200);
    const registered = await h.call("POST", "/auth/passkey/registration/verify", { body: { response: device.create(options.body) }, headers });
    expect(registered.status, JSON.stringify(registered.body)).toBe(200);
    return { device, passkeyId: registered.body.passkey.id as string, userId: options.body.user.id as string };
  }

  async function withPasskey(address = email("owner")) {
    const user = await h.signIn({ email: address });
    return { ...user, address, ...(await register(user.token)) };
  }

  /** An assertion by `device`'s newest passkey for fresh sign-in options. */
  async function assertion(device: SoftAuthenticator) {
    const options = await h.call("POST", "/auth/passkey/sign-in/options", { body: {}, headers: app() });
    expect(options.status).toBe(200);
    return device.get(options.body);
  }
  const signIn = (response: unknown) => h.call("POST", "/auth/passkey/sign-in/verify", { body: { response }, headers: app() });
  const reauthenticate = (token: string, response: unknown) => h.call("POST", "/auth/reauthenticate/passkey", { body: { response }, headers: bearer(token) });

  /** Refused as a passkey not registered here, with nothing written: no session, the counter where it was. */
  async function refused(send: () => Promise<Res>, passkeyId: string) {
    const before = { sessions: await h.db.prisma.session.count(), passkey: await h.db.prisma.passkey.findUniqueOrThrow({ where: { id: passkeyId } }) };
    const res = await send();
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body).toEqual({ error: "PasskeyInvalid", message: "that passkey is not registered here" });
    expect(await h.db.prisma.session.count()).toBe(before.sessions);
    expect(await h.db.prisma.passkey.findUniqueOrThrow({ where: { id: passkeyId } })).toEqual(before.passkey);
  }
  const signedInTo = (res: Res) => {
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.account_id as string;
  };

  /** `primary` links `address`, another account's own, with the code sent there: a merge. */
  async function merge(primary: { token: string }, address: string) {
    const req = await h.call("POST", "/users/link/request", { body: { email: address }, headers: bearer(primary.token) });
    expect(req.status, JSON.stringify(req.body)).toBe(200);
    const verify = await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp: await h.mailbox.otp(address) }, headers: bearer(primary.token) });
    expect(verify.body).toMatchObject({ outcome: "merged" });
  }

  it("user.id at registration is the account's id, and the passkey remembers the account that registered it", async () => {
    const ada = await withPasskey();
    expect(ada.userId).toBe(handleOf(ada.accountId));
    expect((await h.db.prisma.passkey.findUniqueOrThrow({ where: { id: ada.passkeyId } })).registeredBy).toBe(ada.accountId);
    expect(signedInTo(await signIn(await assertion(ada.device)))).toBe(ada.accountId);
    // an authenticator that leaves the handle out is not refused for it
    expect(signedInTo(await signIn(withHandle(await assertion(ada.device), undefined)))).toBe(ada.accountId);
  });

  it("a sign-in whose handle names another account is refused like an unknown passkey", async () => {
    const ada = await withPasskey();
    const mallory = await withPasskey(email("mallory"));
    await refused(async () => signIn(withHandle(await assertion(ada.device), handleOf(mallory.accountId))), ada.passkeyId);
    await refused(async () => signIn(withHandle(await assertion(ada.device), handleOf(`${ada.accountId}x`))), ada.passkeyId);
    await refused(async () => signIn(withHandle(await assertion(ada.device), "AAAA")), ada.passkeyId);
    // over GraphQL too
    const options = await h.gql(`mutation { startPasskeySignIn }`, {}, { "x-api-key": h.publishableKey });
    const r = await h.gql(
      `mutation($r: JSON!) { finishPasskeySignIn(response: $r) { __typename ... on Error { message } } }`,
      { r: withHandle(ada.device.get(options.body.data.startPasskeySignIn), handleOf(mallory.accountId)) },
      { "x-api-key": h.publishableKey },
    );
    expect(r.body.data.finishPasskeySignIn).toEqual({ __typename: "PasskeyInvalid", message: "that passkey is not registered here" });
    expect(signedInTo(await signIn(await assertion(ada.device)))).toBe(ada.accountId);
  });

  it("a re-authentication whose handle names another account is refused, and the session stays as it was", async () => {
    const ada = await withPasskey();
    const mallory = await withPasskey(email("mallory"));
    const sessions = () => h.db.prisma.session.findMany({ where: { accountId: ada.accountId }, select: { id: true, authTime: true, authMethod: true, reauthenticatedWith: true }, orderBy: { id: "asc" } });
    const before = await sessions();
    await refused(async () => reauthenticate(ada.token, withHandle(await assertion(ada.device), handleOf(mallory.accountId))), ada.passkeyId);
    expect(await sessions()).toEqual(before);
    expect((await reauthenticate(ada.token, await assertion(ada.device))).status).toBe(200);
  });

  it("an external sign-in confirmed with a passkey whose handle names another account is refused", async () => {
    const { google, app: client } = world;
    const ada = await withPasskey();
    const mallory = await withPasskey(email("mallory"));
    google.loginAs({ sub: `g-${tag}-${++seq}`, email: ada.address, email_verified: true, name: "Ada" });
    const asked = await externalSignIn(h, google, "google", client.redirectUri);
    expect(asked.body.verification_required, JSON.stringify(asked.body)).toBe("email");
    const confirmWith = (response: unknown) => h.call("POST", "/auth/external/confirm/passkey", { body: { state_id: asked.body.state_id, response } });
    await refused(async () => confirmWith(withHandle(await assertion(ada.device), handleOf(mallory.accountId))), ada.passkeyId);
    expect(signedInTo(await confirmWith(await assertion(ada.device)))).toBe(ada.accountId);
  });

  it("merged: the secondary's passkey signs into the primary with the secondary's id as handle, not the primary's", async () => {
    const secondary = await withPasskey(email("second"));
    const primary = await withPasskey(email("first"));
    await merge(primary, secondary.address);
    expect(signedInTo(await signIn(await assertion(secondary.device)))).toBe(primary.accountId);
    expect((await reauthenticate(primary.token, await assertion(secondary.device))).status).toBe(200);
    await refused(async () => signIn(withHandle(await assertion(secondary.device), handleOf(primary.accountId))), secondary.passkeyId);
    await refused(async () => reauthenticate(primary.token, withHandle(await assertion(secondary.device), handleOf(primary.accountId))), secondary.passkeyId);
    expect(signedInTo(await signIn(await assertion(primary.device)))).toBe(primary.accountId);

    expect((await h.call("POST", "/users/link/unmerge", { body: {}, headers: bearer(primary.token) })).status).toBe(200);
    expect(signedInTo(await signIn(await assertion(secondary.device)))).toBe(secondary.accountId);
    expect(signedInTo(await signIn(await assertion(primary.device)))).toBe(primary.accountId);
  });

  /** A passkey registered on the primary by a session signed in with the merged secondary's address. */
  async function registeredThroughSecondary() {
    const secondaryMail = email("second");
    const secondary = await h.signIn({ email: secondaryMail });
    const primary = await h.signIn({ email: email("first") });
    await merge(primary, secondaryMail);
    const viaSecondary = await h.signIn({ email: secondaryMail });
    expect(viaSecondary.accountId).toBe(primary.accountId);
    const theirs = await register(viaSecondary.token);
    expect(theirs.userId).toBe(handleOf(primary.accountId));
    return { secondary, primary, theirs };
  }
  const unmerge = async (primary: { token: string }) => expect((await h.call("POST", "/users/link/unmerge", { body: {}, headers: bearer(primary.token) })).status).toBe(200);

  describe("passkeys registered before the registering account was stored", () => {
    const forget = (id: string, also: { registeredWith?: null } = {}) => h.db.prisma.passkey.update({ where: { id }, data: { registeredBy: null, ...also } });

    it("one that never moved (registered_with set) is checked against the account holding it", async () => {
      const ada = await withPasskey();
      const mallory = await withPasskey(email("mallory"));
      await forget(ada.passkeyId);
      await refused(async () => signIn(withHandle(await assertion(ada.device), handleOf(mallory.accountId))), ada.passkeyId);
      expect(signedInTo(await signIn(await assertion(ada.device)))).toBe(ada.accountId);
    });

    it("one an older unmerge moved signs in with the primary's id, which is remembered; a handle that is no account id is refused", async () => {
      const { secondary, primary, theirs } = await registeredThroughSecondary();
      // what an unmerge of an earlier build left: the passkey moved to the secondary, nothing
      // saying by whom it was registered (unmerges now remove such a passkey instead)
      await h.db.prisma.passkey.update({ where: { id: theirs.passkeyId }, data: { accountId: secondary.accountId, registeredWith: null, registeredBy: null } });
      await unmerge(primary);
      await refused(async () => signIn(withHandle(await assertion(theirs.device), handleOf("not an account"))), theirs.passkeyId);
      expect(signedInTo(await signIn(await assertion(theirs.device)))).toBe(secondary.accountId);
      expect((await h.db.prisma.passkey.findUniqueOrThrow({ where: { id: theirs.passkeyId } })).registeredBy).toBe(primary.accountId);
      await refused(async () => signIn(withHandle(await assertion(theirs.device), handleOf(secondary.accountId))), theirs.passkeyId);
      expect(signedInTo(await signIn(await assertion(theirs.device)))).toBe(secondary.accountId);
    });

    it("one whose assertions carry no handle still signs in, and stays unknown", async () => {
      const ada = await withPasskey();
      await forget(ada.passkeyId, { registeredWith: null });
      expect(signedInTo(await signIn(withHandle(await assertion(ada.device), undefined)))).toBe(ada.accountId);
      expect((await h.db.prisma.passkey.findUniqueOrThrow({ where: { id: ada.passkeyId } })).registeredBy).toBeNull();
      expect(signedInTo(await signIn(await assertion(ada.device)))).toBe(ada.accountId);
      expect((await h.db.prisma.passkey.findUniqueOrThrow({ where: { id: ada.passkeyId } })).registeredBy).toBe(ada.accountId);
    });
  });
});
