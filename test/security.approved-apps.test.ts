// Approved apps over their lifetime (twenty-third review). Four ways an app kept more than the
// user or the operator meant: a public native client marked first-party (or, 26th review, one
// with a loopback redirect URI in production), whose code any app or program on the device could take with its own PKCE verifier and whose token then managed the account; a
// deleted client whose access tokens still worked; an app approved while first-party that the
// user could not withdraw once it was made third-party; and a consent given through a merged
// secondary's sign-in that stayed with the primary after the unmerge. And the user can see which
// apps they allowed (viewer.authorizedApps, the account page) to withdraw one.
import { readFileSync } from "node:fs";
import { decodeJwt } from "jose";
import * as client from "openid-client";
import { describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { InvalidRequest } from "../src/errors.ts";
import type { Logger } from "pino";
import { checkFirstParty, warnReceivableFirstParty } from "../src/oidc/clients.ts";
import { approveApp, oidcHarness, registerClient } from "./support/oidc.ts";

const CREATE = `mutation($input: OAuthClientInput!) { createOAuthClient(input: $input) { __typename ... on OAuthClientWithSecret { client { id firstParty } } ... on Error { message } } }`;
const UPDATE = `mutation($id: ID!, $input: OAuthClientInput!) { updateOAuthClient(id: $id, input: $input) { __typename ... on UpdateOAuthClientPayload { client { firstParty redirectUris } } ... on Error { message } } }`;
const MIGRATION = "prisma/migrations/20261128220000_public_native_clients_not_first_party/migration.sql";

describe("which public clients may be first-party", () => {
  // 26th review: in production, a program listening on a first-party public client's loopback
  // port took the code and a token that manages the account
  it("in production, no redirect URI that is not https; in development, loopback addresses too", () => {
    const client = (...redirectUris: string[]) => ({ firstParty: true, type: "public" as const, redirectUris });
    expect(() => checkFirstParty(client("https://app.example/cb", "http://localhost:5173/cb"), true)).toThrow(/cannot be first-party with http:\/\/localhost:5173\/cb/);
    expect(() => checkFirstParty(client("http://127.0.0.1/cb"), true)).toThrow(InvalidRequest);
    expect(checkFirstParty(client("https://app.example/cb", "http://localhost:5173/cb"), false)).toBe(true);
    expect(() => checkFirstParty(client("com.example.app:/cb"), false)).toThrow(InvalidRequest);
    expect(checkFirstParty(client("https://app.example/cb"), true)).toBe(true);
    expect(checkFirstParty({ ...client("http://localhost:3000/cb"), type: "confidential" }, true)).toBe(true);
  });
});

describe.each(backends)("approved apps over their lifetime, on %s", (backend) => {
  const { h, email, asUser, asApp, userinfo } = oidcHarness(backend);

  const create = async (input: object) => (await h.gql(CREATE, { input: { name: "App", ...input } })).body.data.createOAuthClient;

  // 26th review: such a client made in development, or before the rule, stays first-party
  it("a production start names the first-party public clients whose codes another program could receive", async () => {
    // the harness is not production, so the client is made as development allows
    const local = await registerClient(h, { type: "PUBLIC", firstParty: true, redirectUris: ["http://localhost:5173/callback"] });
    const warnings = async (production: boolean) => {
      const warned: Array<{ fields: { clients: Array<{ clientId: string }> }; message: string }> = [];
      const logger = { warn: (fields: never, message: string) => void warned.push({ fields, message }) } as unknown as Logger;
      await warnReceivableFirstParty({ prisma: h.db.prisma, logger, config: { ...h.config, production } });
      return warned;
    };
    const [told] = await warnings(true);
    expect(told.message).toMatch(/^\d+ first-party PUBLIC client\(s\) have a redirect URI another app or program on the device can receive/);
    expect(told.fields.clients.map((c) => c.clientId)).toContain(local.clientId);
    expect(await warnings(false)).toEqual([]);

    const third = await h.gql(UPDATE, { id: local.id, input: { firstParty: false } });
    expect(third.body.data.updateOAuthClient.client.firstParty).toBe(false);
    const after = await warnings(true);
    expect(after.flatMap((w) => w.fields.clients.map((c) => c.clientId))).not.toContain(local.clientId);
  });

  it("a public client with an app's private-use scheme cannot be first-party, on create or by an update", async () => {
    for (const redirectUris of [["com.example.app:/cb"], ["https://app.example/cb", "com.example.app:/cb"]]) {
      const refused = await create({ type: "PUBLIC", redirectUris, firstParty: true });
      expect(refused.__typename, JSON.stringify(redirectUris)).toBe("InvalidRequest");
      expect(refused.message).toMatch(/cannot be first-party with com\.example\.app:\/cb/);
    }

    // the same client as a third party, a confidential one with the scheme, a single-page app
    // (outside production its local development address too: the README's first steps)
    const third = await create({ type: "PUBLIC", redirectUris: ["com.example.app:/cb"], firstParty: false });
    expect(third.client.firstParty).toBe(false);
    expect((await create({ type: "CONFIDENTIAL", redirectUris: ["com.example.app:/cb", "http://localhost:3000/cb"], firstParty: true })).client.firstParty).toBe(true);
    expect((await create({ type: "PUBLIC", redirectUris: ["http://localhost:5173/callback"], firstParty: true })).client.firstParty).toBe(true);
    const spa = await create({ type: "PUBLIC", redirectUris: ["https://app.example/cb"], firstParty: true });
    expect(spa.client.firstParty).toBe(true);

    const promoted = (await h.gql(UPDATE, { id: third.client.id, input: { firstParty: true } })).body.data.updateOAuthClient;
    expect(promoted.__typename).toBe("InvalidRequest");
    const schemeAdded = (await h.gql(UPDATE, { id: spa.client.id, input: { redirectUris: ["https://app.example/cb", "com.example.app:/cb"] } })).body.data.updateOAuthClient;
    expect(schemeAdded.__typename).toBe("InvalidRequest");
    const rows = await h.db.prisma.oAuthClient.findMany({ where: { id: { in: [third.client.id, spa.client.id] } }, orderBy: { createdAt: "asc" } });
    expect(rows.map((r) => [r.firstParty, r.redirectUris])).toEqual([
      [false, ["com.example.app:/cb"]],
      [true, ["https://app.example/cb"]],
    ]);
    // both together, as a third party: allowed
    const demoted = (await h.gql(UPDATE, { id: spa.client.id, input: { firstParty: false, redirectUris: ["com.example.app:/cb"] } })).body.data.updateOAuthClient;
    expect(demoted.client).toEqual({ firstParty: false, redirectUris: ["com.example.app:/cb"] });
  });

  it("the upgrade's migration makes the public native first-party clients made before third-party, and only those", async () => {
    const base = { projectId: h.projectId, name: "Before", firstParty: true };
    const made = await Promise.all(
      [
        { type: "public" as const, redirectUris: ["com.example.old:/cb"] },
        { type: "public" as const, redirectUris: ["https://old.example/cb", "http://127.0.0.1:8080/cb"] },
        { type: "confidential" as const, redirectUris: ["com.example.old:/cb"] },
        { type: "public" as const, redirectUris: ["https://old.example/cb", "HTTPS://old.example/other"] },
      ].map((c, i) => h.db.prisma.oAuthClient.create({ data: { ...base, ...c, id: `oac_mig${i}${backend}`, clientId: `lgc_mig${i}${backend}` } })),
    );
    await h.db.prisma.$executeRawUnsafe(readFileSync(MIGRATION, "utf8"));
    const after = await h.db.prisma.oAuthClient.findMany({ where: { id: { in: made.map((c) => c.id) } }, orderBy: { id: "asc" } });
    expect(after.map((c) => c.firstParty)).toEqual([false, true, true, true]);
  });

  it("deleting a client ends the sessions its users signed in with through it: its access token is refused", async () => {
    const who = email("deleted");
    await h.signIn({ email: who });
    const app = await registerClient(h, { firstParty: false });
    const { tokens } = await approveApp(h, app, who, "openid email offline_access");
    expect((await userinfo(tokens.access_token)).status).toBe(200);

    await h.gql(`mutation($id: ID!) { deleteOAuthClient(id: $id) { __typename } }`, { id: app.id });
    expect((await userinfo(tokens.access_token)).status).toBe(401);
    const session = await h.db.prisma.session.findUnique({ where: { id: decodeJwt(tokens.access_token).sid as string } });
    expect(session?.endedAt).not.toBeNull();
  });

  // 31st review: kept, what a first-party app got went on reading userinfo under an app the user
  // never approved as a third party, and "Apps you allowed" did not list it
  it("an app made third-party loses what it got as a first-party app; what users approved on its consent page stays", async () => {
    const asked = email("consented");
    const unasked = email("unasked");
    await h.signIn({ email: asked });
    await h.signIn({ email: unasked });
    const app = await registerClient(h, { firstParty: false });
    const approved = await approveApp(h, app, asked, "openid email offline_access");
    expect(approved.consentAsked).toBe(true);
    await h.gql(`mutation($id: ID!) { updateOAuthClient(id: $id, input: { firstParty: true }) { __typename } }`, { id: app.id });
    const given = await approveApp(h, app, unasked, "openid email offline_access");
    expect(given.consentAsked).toBe(false);

    await h.gql(`mutation($id: ID!) { updateOAuthClient(id: $id, input: { firstParty: false }) { __typename } }`, { id: app.id });
    await expect(client.refreshTokenGrant(given.cfg, given.tokens.refresh_token!)).rejects.toMatchObject({ error: "invalid_grant" });
    expect((await userinfo(given.tokens.access_token)).status).toBe(401);
    const session = await h.db.prisma.session.findUnique({ where: { id: decodeJwt(given.tokens.access_token).sid as string } });
    expect(session?.endedAt).not.toBeNull();

    expect((await userinfo(approved.tokens.access_token)).status).toBe(200);
    const refreshed = await client.refreshTokenGrant(approved.cfg, approved.tokens.refresh_token!);
    expect((await userinfo(refreshed.access_token)).body).toMatchObject({ email: asked });
  });

  // 29th review: a re-authentication answered linkgate's own tokens for the session, which
  // describe the whole account, and they kept full access once the app was made third-party
  it("a re-authentication through a first-party app's token gives the app's tokens again, which lose their access when it is made third-party", async () => {
    const who = email("reauth");
    await h.signIn({ email: who });
    const app = await registerClient(h, { firstParty: true });
    const { tokens } = await approveApp(h, app, who, "openid");
    const start = await h.call("POST", "/auth/reauthenticate/start", { body: { email: who }, headers: asApp(tokens.access_token) });
    expect(start.status, JSON.stringify(start.body)).toBe(200);
    const again = await h.call("POST", "/auth/reauthenticate/verify", { body: { state_id: start.body.state_id, otp: await h.mailbox.otp(who) }, headers: asApp(tokens.access_token) });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    const reissued = again.body.access_token as string;
    expect(decodeJwt(reissued)).toMatchObject({ client_id: app.clientId, scope: "openid", sid: decodeJwt(tokens.access_token).sid });
    expect(decodeJwt(again.body.id_token)).not.toHaveProperty("email");
    expect((await userinfo(reissued)).body).toEqual({ sub: expect.any(String) });
    expect((await h.call("POST", "/users/link/request", { body: { email: email("added") }, headers: asApp(reissued) })).status).toBe(200);

    // made third-party, it keeps nothing it got without a consent page: the session has ended
    await h.gql(`mutation($id: ID!) { updateOAuthClient(id: $id, input: { firstParty: false }) { __typename } }`, { id: app.id });
    for (const token of [tokens.access_token, reissued]) {
      const refused = await h.call("POST", "/users/link/request", { body: { email: email("later") }, headers: asApp(token) });
      expect(refused.status).toBe(401);
    }
  });

  it("viewer.authorizedApps lists the apps the user allowed, and only theirs; withdrawn, one is gone", async () => {
    const who = email("lister");
    const owner = await h.signIn({ email: who });
    const other = email("other");
    await h.signIn({ email: other });
    const notes = await registerClient(h, { firstParty: false, name: "Partner Notes" });
    const own = await registerClient(h, { firstParty: true, name: "Our app" });
    await approveApp(h, notes, who, "openid email");
    await approveApp(h, own, who, "openid email");
    await approveApp(h, await registerClient(h, { firstParty: false, name: "Someone else's app" }), other, "openid");

    const listed = async () => (await h.gql(`{ viewer { authorizedApps { clientId name scopes allowedAt } } }`, {}, asUser(owner.token))).body.data.viewer.authorizedApps;
    expect(await listed()).toEqual([{ clientId: notes.clientId, name: "Partner Notes", scopes: ["openid", "email"], allowedAt: expect.any(String) }]);
    await h.gql(`mutation($c: String!) { revokeOAuthConsent(clientId: $c) { __typename } }`, { c: notes.clientId }, asUser(owner.token));
    expect(await listed()).toEqual([]);
  });

  it("an unmerge withdraws the primary's remembered consents: one given through the secondary's sign-in is asked again", async () => {
    const p = email("primary");
    const q = email("secondary");
    const owner = await h.signIn({ email: p });
    await h.signIn({ email: q });
    const req = await h.call("POST", "/users/link/request", { body: { email: q }, headers: asUser(owner.token) });
    const done = await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp: await h.mailbox.otp(q) }, headers: asUser(owner.token) });
    expect(done.body.outcome).toBe("merged");

    const app = await registerClient(h, { firstParty: false });
    const byQ = await approveApp(h, app, q, "openid email offline_access");
    expect(byQ.consentAsked).toBe(true);
    expect(decodeJwt(byQ.tokens.access_token).sub).toBe(owner.accountId);

    expect((await h.call("POST", "/users/link/unmerge", { body: {}, headers: asUser(owner.token) })).status).toBe(200);
    expect((await approveApp(h, app, p, "openid email offline_access")).consentAsked).toBe(true);
  });
});
