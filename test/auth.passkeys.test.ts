// Passkeys (docs/authentication.md, passkeys): register and sign in with WebAuthn, over GraphQL and REST,
// with real P-256 credentials from a software authenticator; a passkey belongs to the account
// that registered it and follows the merge rule of its identifiers.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";

const ORIGIN = "http://localhost:4000"; // the harness's default issuer: passkeys are for "localhost"

describe.each(backends)("passkeys on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const events = async (type: string, contains = "") =>
    (await h.db.prisma.outboxEvent.findMany({ where: { eventType: type, body: { contains } }, orderBy: { seq: "asc" } })).map((e) => JSON.parse(e.body));

  async function register(token: string, auth: SoftAuthenticator, name?: string) {
    const opts = await h.gql(`mutation { startPasskeyRegistration { ... on PasskeyCreationOptions { options } } }`, {}, bearer(token));
    const response = auth.create(opts.body.data.startPasskeyRegistration.options);
    const r = await h.gql(
      `mutation($r: JSON!, $n: String) { finishPasskeyRegistration(response: $r, name: $n) { __typename ... on Passkey { id name } ... on Error { message } } }`,
      { r: response, n: name },
      bearer(token),
    );
    return r.body.data.finishPasskeyRegistration;
  }

  async function signInWith(auth: SoftAuthenticator, credential = auth.credentials[auth.credentials.length - 1], overrides = {}) {
    const opts = await h.gql(`mutation { startPasskeySignIn }`, {}, { "x-api-key": h.publishableKey });
    const response = auth.get(opts.body.data.startPasskeySignIn, credential, overrides);
    const r = await h.gql(
      `mutation($r: JSON!) { finishPasskeySignIn(response: $r) { __typename ... on SignInTokens { accountId accessToken } ... on Error { message } } }`,
      { r: response },
      { "x-api-key": h.publishableKey },
    );
    return { result: r.body.data.finishPasskeySignIn, response };
  }

  it("registers a passkey and signs in with it, no identifier typed: same account, working tokens, the events", async () => {
    const user = await h.signIn({ email: "pk-owner@example.com" });
    const auth = new SoftAuthenticator(ORIGIN);
    const passkey = await register(user.token, auth, "Laptop");
    expect(passkey).toMatchObject({ __typename: "Passkey", name: "Laptop" });

    const { result } = await signInWith(auth);
    expect(result).toMatchObject({ __typename: "SignInTokens", accountId: user.accountId });
    const info = await h.call("GET", "/oauth/userinfo", { headers: bearer(result.accessToken) });
    expect(info.body).toMatchObject({ sub: user.accountId, email: "pk-owner@example.com" });

    const viewer = await h.gql(`{ viewer { passkeys { edges { node { id name lastUsedAt } } } } }`, {}, bearer(result.accessToken));
    expect(viewer.body.data.viewer.passkeys.edges).toEqual([{ node: { id: passkey.id, name: "Laptop", lastUsedAt: expect.any(String) } }]);

    const [registered] = await events("user.passkey.registered", user.accountId);
    expect(registered.data).toMatchObject({ user: { user_id: user.accountId }, passkey: { id: passkey.id, name: "Laptop", created_at: expect.any(String) } });
    expect(await events("user.passkey.login", user.accountId)).toHaveLength(1);
    const logins = await events("user.authentication.success", user.accountId);
    expect(logins.map((e) => e.data.method)).toEqual(["otp", "passkey"]);
  });

  it("the same operations over REST: options, verify, list, rename, remove (which emits user.updated)", async () => {
    const user = await h.signIn({ email: "pk-rest@example.com" });
    const headers = { ...bearer(user.token), "x-api-key": h.publishableKey };
    const auth = new SoftAuthenticator(ORIGIN);
    const opts = await h.call("POST", "/auth/passkey/registration/options", { headers });
    expect(opts.status).toBe(200);
    expect(opts.body.authenticatorSelection).toMatchObject({ residentKey: "required" });
    const created = await h.call("POST", "/auth/passkey/registration/verify", { body: { response: auth.create(opts.body), name: "Phone" }, headers });
    expect(created.status).toBe(200);
    expect(created.body.passkey).toMatchObject({ id: expect.stringMatching(/^psk_/), name: "Phone" });

    const signOpts = await h.call("POST", "/auth/passkey/sign-in/options", { headers: { "x-api-key": h.publishableKey } });
    const tokens = await h.call("POST", "/auth/passkey/sign-in/verify", { body: { response: auth.get(signOpts.body) }, headers: { "x-api-key": h.publishableKey } });
    expect(tokens.status).toBe(200);
    expect(tokens.body).toMatchObject({ account_id: user.accountId, token_type: "Bearer" });

    const list = await h.call("GET", "/auth/passkey/list", { headers });
    expect(list.body.passkeys).toHaveLength(1);
    const renamed = await h.call("POST", "/auth/passkey/rename", { body: { id: created.body.passkey.id, name: "Work phone" }, headers });
    expect(renamed.body.passkey.name).toBe("Work phone");
    // `name` is required (docs/rest.md): leaving it out is 400, not a rename to the default "Passkey"
    for (const body of [{ id: created.body.passkey.id }, {}]) {
      const unnamed = await h.call("POST", "/auth/passkey/rename", { body, headers });
      expect(unnamed.status, JSON.stringify(unnamed.body)).toBe(400);
      expect(unnamed.body).toMatchObject({ error: "InvalidRequest" });
    }
    expect((await h.call("GET", "/auth/passkey/list", { headers })).body.passkeys[0].name).toBe("Work phone");
    const updatedBefore = (await events("user.updated", user.accountId)).length;
    const removed = await h.call("POST", "/auth/passkey/remove", { body: { id: created.body.passkey.id }, headers });
    expect(removed.body).toEqual({ removed_id: created.body.passkey.id });
    expect((await events("user.updated", user.accountId)).length).toBe(updatedBefore + 1);
    expect((await h.call("POST", "/auth/passkey/remove", { body: { id: created.body.passkey.id }, headers })).status).toBe(404);
    const gone = await signInWith(auth);
    expect(gone.result.__typename).toBe("PasskeyInvalid");
  });

  it("after a merge the secondary's passkey signs into the primary; unmerge gives it back", async () => {
    const primary = await h.signIn({ email: "pk-primary@example.com" });
    const secondary = await h.signIn({ email: "pk-secondary@example.com" });
    const secondaryKey = new SoftAuthenticator(ORIGIN);
    await register(secondary.token, secondaryKey, "Secondary's key");

    const req = await h.call("POST", "/users/link/request", { body: { email: "pk-secondary@example.com" }, headers: bearer(primary.token) });
    const merged = await h.call("POST", "/users/link/verify", {
      body: { state_id: req.body.state_id, otp: await h.mailbox.otp("pk-secondary@example.com") },
      headers: bearer(primary.token),
    });
    expect(merged.body.outcome).toBe("merged");
    expect((await signInWith(secondaryKey)).result.accountId).toBe(primary.accountId);

    const un = await h.call("POST", "/users/link/unmerge", { body: {}, headers: bearer(primary.token) });
    expect(un.status).toBe(200);
    expect((await signInWith(secondaryKey)).result.accountId).toBe(secondary.accountId);
  });

  it("deleteAccount removes the account's passkeys; a passkey is not an identifier (LastIdentifier holds)", async () => {
    const user = await h.signIn({ email: "pk-delete@example.com" });
    const auth = new SoftAuthenticator(ORIGIN);
    await register(user.token, auth);
    const last = await h.call("POST", "/users/link/remove", { body: { email: "pk-delete@example.com" }, headers: bearer(user.token) });
    expect(last.body.error).toBe("LastIdentifier");
    const del = await h.gql(`mutation { deleteAccount { ... on DeleteAccountPayload { deleted } } }`, {}, bearer(user.token));
    expect(del.body.data.deleteAccount.deleted).toBe(true);
    expect(await h.db.prisma.passkey.count({ where: { accountId: user.accountId } })).toBe(0);
    expect((await signInWith(auth)).result.__typename).toBe("PasskeyInvalid");
  });

  it("a signature counter that goes backwards is refused and reported", async () => {
    const user = await h.signIn({ email: "pk-clone@example.com" });
    const auth = new SoftAuthenticator(ORIGIN);
    const passkey = await register(user.token, auth);
    expect((await signInWith(auth, undefined, { counter: 7 })).result.__typename).toBe("SignInTokens");
    const sessions = await h.db.prisma.session.count({ where: { accountId: user.accountId } });
    const cloned = await signInWith(auth, undefined, { counter: 3 });
    expect(cloned.result).toMatchObject({ __typename: "PasskeyInvalid", message: expect.stringMatching(/counter/) });
    expect(await h.db.prisma.session.count({ where: { accountId: user.accountId } })).toBe(sessions);
    const [report] = await events("security.suspicious_activity", passkey.id);
    expect(report.data).toMatchObject({ reason: "passkey_counter_regressed", user_id: user.accountId, stored_counter: 7, presented_counter: 3 });
  });

  describe("bad input gets a clear error and changes nothing", () => {
    let user: { token: string; accountId: string };
    let auth: SoftAuthenticator;
    beforeAll(async () => {
      user = await h.signIn({ email: "pk-attacks@example.com" });
      auth = new SoftAuthenticator(ORIGIN);
      await register(user.token, auth);
    });

    async function refusedAndUnchanged(send: () => Promise<{ result: any }>) {
      const before = { sessions: await h.db.prisma.session.count(), passkeys: await h.db.prisma.passkey.findMany({ orderBy: { id: "asc" } }) };
      const { result } = await send();
      expect(result.__typename).toBe("PasskeyInvalid");
      expect(result.message).toEqual(expect.any(String));
      expect(await h.db.prisma.session.count()).toBe(before.sessions);
      expect(await h.db.prisma.passkey.findMany({ orderBy: { id: "asc" } })).toEqual(before.passkeys);
    }

    it("a forged assertion (signed by another key)", async () => {
      const forger = new SoftAuthenticator(ORIGIN);
      const opts = await h.gql(`mutation { startPasskeyRegistration { ... on PasskeyCreationOptions { options } } }`, {}, bearer(user.token));
      forger.create(opts.body.data.startPasskeyRegistration.options); // a key the server never saw
      forger.credentials[0].id = auth.credentials[0].id; // claiming the victim's credential id
      await refusedAndUnchanged(() => signInWith(forger));
    });

    it("a replayed assertion", async () => {
      const { result, response } = await signInWith(auth);
      expect(result.__typename).toBe("SignInTokens");
      await refusedAndUnchanged(async () => {
        const r = await h.gql(`mutation($r: JSON!) { finishPasskeySignIn(response: $r) { __typename ... on Error { message } } }`, { r: response });
        return { result: r.body.data.finishPasskeySignIn };
      });
    });

    it("a challenge from another project", async () => {
      const other = await h.gql(`mutation { createProject(name: "pk-other") { ... on CreateProjectPayload { publishableKey } } }`, {}, { "x-admin-token": h.adminToken });
      const otherKey = other.body.data.createProject.publishableKey;
      const opts = await h.gql(`mutation { startPasskeySignIn }`, {}, { "x-api-key": otherKey });
      await refusedAndUnchanged(async () => {
        const r = await h.gql(`mutation($r: JSON!) { finishPasskeySignIn(response: $r) { __typename ... on Error { message } } }`, {
          r: auth.get(opts.body.data.startPasskeySignIn),
        });
        return { result: r.body.data.finishPasskeySignIn };
      });
    });

    it("an expired challenge", async () => {
      const opts = await h.gql(`mutation { startPasskeySignIn }`, {}, { "x-api-key": h.publishableKey });
      const challenge = opts.body.data.startPasskeySignIn.challenge;
      // five minutes pass
      await h.db.prisma.webauthnChallenge.update({ where: { challenge }, data: { expiresAt: new Date(Date.now() - 1000) } });
      await refusedAndUnchanged(async () => {
        const r = await h.gql(`mutation($r: JSON!) { finishPasskeySignIn(response: $r) { __typename ... on Error { message } } }`, {
          r: auth.get(opts.body.data.startPasskeySignIn),
        });
        return { result: r.body.data.finishPasskeySignIn };
      });
    });

    it("a wrong origin, or a wrong RP id", async () => {
      await refusedAndUnchanged(() => signInWith(auth, undefined, { origin: "https://evil.example" }));
      await refusedAndUnchanged(() => signInWith(auth, undefined, { rpId: "evil.example" }));
      const opts = await h.gql(`mutation { startPasskeyRegistration { ... on PasskeyCreationOptions { options } } }`, {}, bearer(user.token));
      const r = await h.gql(`mutation($r: JSON!) { finishPasskeyRegistration(response: $r) { __typename } }`, {
        r: new SoftAuthenticator("https://evil.example").create(opts.body.data.startPasskeyRegistration.options),
      }, bearer(user.token));
      expect(r.body.data.finishPasskeyRegistration.__typename).toBe("PasskeyInvalid");
    });

    it("malformed response bodies, over REST and GraphQL", async () => {
      const before = await h.db.prisma.passkey.count();
      for (const response of ["x", 42, [], {}, { id: "a", rawId: "a", type: "public-key", response: {} }, { id: "!!", rawId: "!!", type: "public-key", response: { clientDataJSON: "e30", authenticatorData: "AA", signature: "AA" } }]) {
        const rest = await h.call("POST", "/auth/passkey/sign-in/verify", { body: { response }, headers: { "x-api-key": h.publishableKey } });
        expect(rest.status, JSON.stringify(response)).toBe(400);
        expect(rest.body.error).toBe("PasskeyInvalid");
        const g = await h.gql(`mutation($r: JSON!) { finishPasskeyRegistration(response: $r) { __typename } }`, { r: response }, bearer(user.token));
        expect(g.body.data.finishPasskeyRegistration.__typename).toBe("PasskeyInvalid");
      }
      const extra = await h.call("POST", "/auth/passkey/sign-in/verify", { body: { response: {}, extra: 1 }, headers: { "x-api-key": h.publishableKey } });
      expect(extra.body.error).toBe("InvalidRequest");
      // no REST field takes null (docs/rest.md, "Bodies")
      const nothing = await h.call("POST", "/auth/passkey/sign-in/verify", { body: { response: null }, headers: { "x-api-key": h.publishableKey } });
      expect(nothing.body.error).toBe("InvalidRequest");
      expect(await h.db.prisma.passkey.count()).toBe(before);
    });
  });
});
