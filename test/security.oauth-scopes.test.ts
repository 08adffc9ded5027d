// A token is worth what the user granted (docs/oidc.md, "What a token reaches"). The attack: a
// third-party app the user approved with `openid` alone took its access token, with the
// project's publishable key, to read the user's e-mail and phone, start a link to the attacker's
// address, register its own passkey, sign the owner out everywhere and delete the account.
// Every one of those is refused with InsufficientScope now, on REST and GraphQL alike, while
// first-party apps and linkgate's own sign-in keep full access.
import { decodeJwt } from "jose";
import { describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { approveApp, oidcHarness, registerClient, type RegisteredClient } from "./support/oidc.ts";

/** Every REST route that manages the signed-in account, with a body it would accept. */
const REST_MANAGEMENT: Array<[path: string, body: unknown]> = [
  ["/users/link/request", { email: "attacker@evil.example" }],
  ["/users/link/verify", { state_id: "otp_x", otp: "123456" }],
  ["/users/link/remove", { email: "attacker@evil.example" }],
  ["/users/link/unmerge", {}],
  ["/auth/passkey/registration/options", {}],
  ["/auth/reauthenticate/start", { email: "owner@example.com" }],
];

/** Every GraphQL operation with the user's token, each a way to read or change the account. */
const GRAPHQL_MANAGEMENT: Array<[name: string, document: string]> = [
  ["viewer", `{ viewer { id identifiers { value } } }`],
  ["requestLink", `mutation { requestLink(email: "attacker@evil.example") { __typename } }`],
  ["removeLink", `mutation { removeLink(email: "attacker@evil.example") { __typename } }`],
  ["unmerge", `mutation { unmerge { __typename } }`],
  ["startPasskeyRegistration", `mutation { startPasskeyRegistration { __typename } }`],
  ["endOtherSessions", `mutation { endOtherSessions { __typename } }`],
  ["updateProfile", `mutation { updateProfile(name: "Call +1 900 555 0100") { __typename } }`],
  ["revokeOAuthConsent", `mutation { revokeOAuthConsent(clientId: "lgc_x") { __typename } }`],
  ["startReauthentication", `mutation { startReauthentication(email: "owner@example.com") { __typename } }`],
  ["signOut", `mutation { signOut }`],
  ["deleteAccount", `mutation { deleteAccount { __typename } }`],
];

describe.each(backends)("OAuth apps' tokens reach what the user granted, on %s", (backend) => {
  const { h, email, asUser: asOwner, asApp, userinfo } = oidcHarness(backend);

  /** The user signs in on /login inside the app's flow and allows what it asks; the app's tokens. */
  const approve = async (app: RegisteredClient, who: string, scope: string) => (await approveApp(h, app, who, scope)).tokens;

  it("a third-party app granted only openid reads only sub, at userinfo and in the ID token", async () => {
    const who = email("owner");
    const owner = await h.signIn({ email: who });
    await linkPhone(owner.token, "+12025550181");
    const app = await registerClient(h, { firstParty: false, name: "Partner" });
    const tokens = await approve(app, who, "openid");

    const info = await userinfo(tokens.access_token);
    expect(info.status).toBe(200);
    expect(info.body).toEqual({ sub: owner.accountId });
    const id = tokens.claims()!;
    expect(id.sub).toBe(owner.accountId);
    for (const claim of ["email", "email_verified", "phone_number", "phone_number_verified", "name", "updated_at"]) expect(id).not.toHaveProperty(claim);
  });

  it("each scope adds its own claims and no others: email without phone or profile", async () => {
    const who = email("scoped");
    const owner = await h.signIn({ email: who });
    await linkPhone(owner.token, "+12025550182");
    const app = await registerClient(h, { firstParty: false });
    const tokens = await approve(app, who, "openid email");
    expect((await userinfo(tokens.access_token)).body).toEqual({ sub: owner.accountId, email: who, email_verified: true });
    // linkgate's own sign-in token describes the whole account, as before
    expect((await userinfo(owner.token)).body).toMatchObject({ sub: owner.accountId, email: who, phone_number: "+12025550182", updated_at: expect.any(Number) });
  });

  it("a third-party app's token manages nothing over REST: 403 InsufficientScope, nothing sent, nothing changed", async () => {
    const who = email("victim");
    const owner = await h.signIn({ email: who });
    const app = await registerClient(h, { firstParty: false });
    const tokens = await approve(app, who, "openid");
    const sentBefore = h.mailbox.messages.length;

    for (const [path, body] of REST_MANAGEMENT) {
      const res = await h.call("POST", path, { body, headers: asApp(tokens.access_token) });
      expect({ path, status: res.status, body: res.body }).toEqual({ path, status: 403, body: { error: "InsufficientScope", message: expect.any(String) } });
    }
    expect(h.mailbox.messages.slice(sentBefore).filter((m) => m.to === "attacker@evil.example")).toEqual([]);
    // the owner is still signed in, with the one identifier they had
    expect((await userinfo(owner.token)).status).toBe(200);
    const viewer = await h.gql(`{ viewer { identifiers { value } passkeys(first: 5) { edges { node { id } } } } }`, {}, asOwner(owner.token));
    expect(viewer.body.data.viewer).toEqual({ identifiers: [{ value: who }], passkeys: { edges: [] } });
  });

  it("a third-party app's token manages nothing over GraphQL: FORBIDDEN InsufficientScope, the owner keeps their sessions and account", async () => {
    const who = email("graphql");
    const owner = await h.signIn({ email: who });
    const app = await registerClient(h, { firstParty: false });
    const tokens = await approve(app, who, "openid email phone profile");

    for (const [name, document] of GRAPHQL_MANAGEMENT) {
      const res = await h.gql(document, {}, asApp(tokens.access_token));
      expect({ name, data: res.body.data ?? null, extensions: res.body.errors?.[0]?.extensions }).toEqual({
        name,
        data: null,
        extensions: { code: "FORBIDDEN", error: "InsufficientScope" },
      });
    }
    expect((await userinfo(owner.token)).status).toBe(200);
    expect((await userinfo(tokens.access_token)).status).toBe(200);
    expect(await h.db.prisma.account.count({ where: { id: owner.accountId } })).toBe(1);
  });

  it("a first-party app keeps full access, and an app made third-party loses it on its tokens' next call", async () => {
    const who = email("first");
    await h.signIn({ email: who });
    // approved on its consent page, so being made third-party again leaves the user's grant
    // (one given without a consent page ends: security.approved-apps.test.ts)
    const app = await registerClient(h, { firstParty: false });
    const tokens = await approve(app, who, "openid");
    await h.gql(`mutation($id: ID!) { updateOAuthClient(id: $id, input: { firstParty: true }) { __typename } }`, { id: app.id });
    // userinfo still follows the scopes granted, whoever the app is
    expect(Object.keys((await userinfo(tokens.access_token)).body)).toEqual(["sub"]);
    const linked = await h.call("POST", "/users/link/request", { body: { email: email("added") }, headers: asApp(tokens.access_token) });
    expect(linked.status).toBe(200);
    expect((await h.gql(`{ viewer { id } }`, {}, asApp(tokens.access_token))).body.data.viewer.id).toBe(decodeJwt(tokens.access_token).sub);

    const demoted = await h.gql(`mutation($id: ID!) { updateOAuthClient(id: $id, input: { firstParty: false }) { __typename } }`, { id: app.id });
    expect(demoted.body.data.updateOAuthClient.__typename).toBe("UpdateOAuthClientPayload");
    const refused = await h.call("POST", "/users/link/request", { body: { email: email("later") }, headers: asApp(tokens.access_token) });
    expect(refused.body.error).toBe("InsufficientScope");
  });

  /** Attaches a phone to the account with linkgate's own sign-in token (the owner, not an app). */
  async function linkPhone(token: string, phone: string) {
    const req = await h.call("POST", "/users/link/request", { body: { phone }, headers: asOwner(token) });
    expect(req.status).toBe(200);
    const done = await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp: await h.mailbox.otp(phone) }, headers: asOwner(token) });
    expect(done.body.outcome).toBe("attached");
  }
});
