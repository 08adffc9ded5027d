// A third-party app's sign-in finishing while the user withdraws the app (revokeOAuthConsent), an
// unmerge withdraws the primary's consents, or the project makes a first-party app third-party
// (docs/oidc.md, "Clients"). The consent was checked (a remembered yes) or written (the "Allow"
// on the consent page), and only then was the grant saved and bound to the session: a withdrawal
// committed in between found no grant of the app to end, and the grant saved after it was
// live. The user saw the app gone from "Apps you allowed" while it held a fresh refresh token
// on the account for 30 days. The grant is now bound under the account's lock, which the
// withdrawal takes, and only while the app's consent (or its being first-party) still covers it.
// Postgres only: a trigger holds the grant's INSERT until the withdrawal has committed; on PGlite
// one connection serves everything in turn.
import * as client from "openid-client";
import { describe, expect, it } from "vitest";
import { serverUrl } from "./support/db.ts";
import { lockHolder, waitingForLock } from "./support/locks.ts";
import { Agent, approveApp, authorizationUrl, callback, discover, oidcHarness, registerClient, signInByCode, startInteraction, type RegisteredClient } from "./support/oidc.ts";

const onPostgres = serverUrl ? describe : describe.skip;
const SCOPE = "openid email offline_access";
const GATE = 7_341_001;
const REVOKE = `mutation($clientId: String!) { revokeOAuthConsent(clientId: $clientId) { __typename ... on Error { message } } }`;

onPostgres("a third-party app's sign-in finishing while the user withdraws it", () => {
  const { h, email, asUser, userinfo } = oidcHarness("postgres");
  const blocker = lockHolder(h);

  /**
   * Runs `finishing` (which saves the app's grant) with the grant's INSERT held by a trigger
   * until `meanwhile` has answered; then lets it go and returns what `finishing` answered.
   */
  async function grantHeldWhile<T>(finishing: () => Promise<T>, meanwhile: () => Promise<unknown>): Promise<T> {
    await blocker.query(`
      CREATE OR REPLACE FUNCTION test_hold_grants() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.kind = 'Grant' THEN PERFORM pg_advisory_xact_lock_shared(${GATE}); END IF;
        RETURN NEW;
      END $$`);
    await blocker.query("CREATE TRIGGER test_hold_grants BEFORE INSERT ON oidc_payloads FOR EACH ROW EXECUTE FUNCTION test_hold_grants()");
    try {
      await blocker.query("BEGIN");
      await blocker.query("SELECT pg_advisory_xact_lock($1)", [GATE]);
      const answer = finishing();
      answer.catch(() => {});
      await waitingForLock(blocker, 1);
      await meanwhile();
      await blocker.query("COMMIT");
      return await answer;
    } finally {
      await blocker.query("ROLLBACK").catch(() => {});
      await blocker.query("DROP TRIGGER IF EXISTS test_hold_grants ON oidc_payloads");
    }
  }

  /** What the app holds for the account after the flow: each of its live grants' refresh tokens and tokens. */
  async function liveGrants(app: RegisteredClient, accountId: string): Promise<number> {
    const [row] = await h.db.prisma.$queryRaw<{ n: number }[]>`
      SELECT count(*)::int AS n FROM oidc_payloads g JOIN sessions s ON s.id = g.session_id
      WHERE g.kind = 'Grant' AND g.payload->>'clientId' = ${app.clientId} AND g.payload->>'accountId' = ${accountId} AND s.ended_at IS NULL`;
    return row.n;
  }

  /** The app's code exchanged, if the browser got one; the tokens, or null. */
  async function tokensFrom(app: RegisteredClient, agent: Agent, auth: Awaited<ReturnType<typeof authorizationUrl>>, cfg: client.Configuration, redirectTo: string | undefined) {
    if (!redirectTo) return null;
    const cb = await callback(agent, redirectTo).catch(() => null);
    if (!cb?.searchParams.get("code")) return null;
    return client.authorizationCodeGrant(cfg, cb, { pkceCodeVerifier: auth.verifier, expectedState: auth.state, expectedNonce: auth.nonce }).catch(() => null);
  }

  /**
   * The app got nothing that lasts from the raced sign-in: tokens of it, if a code came back, are
   * refused; no grant of the app lives; the sign-in was told it expired (400 InvalidRequest), its
   * session, opened for this app alone, ended.
   */
  async function expectAppGotNothing(app: RegisteredClient, agent: Agent, auth: Awaited<ReturnType<typeof authorizationUrl>>, cfg: client.Configuration, answer: { status: number; body: any }, accountId: string) {
    const tokens = await tokensFrom(app, agent, auth, cfg, answer.body.redirectTo);
    if (tokens) {
      expect((await userinfo(tokens.access_token)).status).toBe(401);
      await expect(client.refreshTokenGrant(cfg, tokens.refresh_token!)).rejects.toMatchObject({ error: "invalid_grant" });
    }
    expect(await liveGrants(app, accountId)).toBe(0);
    expect([answer.status, answer.body.error], JSON.stringify(answer.body)).toEqual([400, "InvalidRequest"]);
  }

  it("an Allow on the consent page racing the withdrawal leaves the app nothing", async () => {
    const address = email("allow");
    const app = await registerClient(h, { firstParty: false, name: "Partner" });
    const user = await h.signIn({ email: address });
    const cfg = await discover(h, app);
    const agent = new Agent(h);
    const auth = await authorizationUrl(cfg, app, { scope: SCOPE });
    const uid = await startInteraction(agent, auth.url);
    const signed = await signInByCode(h, agent, uid, address);
    expect(signed.body.consent, JSON.stringify(signed.body)).toBeTruthy();

    let revoked: { status: number; body: any } | undefined;
    const allowed = await grantHeldWhile(
      () => agent.json(`/oauth/interaction/${uid}/consent`, { allow: true }),
      async () => {
        revoked = await h.gql(REVOKE, { clientId: app.clientId }, asUser(user.token));
      },
    );
    // the withdrawal came after the Allow's consent was written: it withdrew that consent
    expect(revoked!.body.data?.revokeOAuthConsent, JSON.stringify(revoked!.body)).toEqual({ __typename: "RevokeOAuthConsentPayload" });

    await expectAppGotNothing(app, agent, auth, cfg, allowed, user.accountId);
    const listed = await h.gql(`{ viewer { authorizedApps { clientId } } }`, {}, asUser(user.token));
    expect(listed.body.data.viewer.authorizedApps).toEqual([]);
  });

  it("a sign-in on a remembered yes racing the withdrawal leaves the app nothing, and the next one asks again", async () => {
    const address = email("remembered");
    const app = await registerClient(h, { firstParty: false, name: "Partner" });
    const user = await h.signIn({ email: address });
    expect((await approveApp(h, app, address, SCOPE)).consentAsked).toBe(true);

    const cfg = await discover(h, app);
    const agent = new Agent(h);
    const auth = await authorizationUrl(cfg, app, { scope: SCOPE });
    const uid = await startInteraction(agent, auth.url);
    let revoked: { status: number; body: any } | undefined;
    const signed = await grantHeldWhile(
      () => signInByCode(h, agent, uid, address),
      async () => {
        revoked = await h.gql(REVOKE, { clientId: app.clientId }, asUser(user.token));
      },
    );
    expect(revoked!.body.data?.revokeOAuthConsent, JSON.stringify(revoked!.body)).toEqual({ __typename: "RevokeOAuthConsentPayload" });

    await expectAppGotNothing(app, agent, auth, cfg, signed, user.accountId);
    expect((await approveApp(h, app, address, SCOPE)).consentAsked).toBe(true);
  });

  it("a first-party app's sign-in racing its change to third-party leaves the app nothing the user did not approve", async () => {
    const address = email("first-party");
    const app = await registerClient(h, { firstParty: true, name: "Ours, for now" });
    const user = await h.signIn({ email: address });
    const cfg = await discover(h, app);
    const agent = new Agent(h);
    const auth = await authorizationUrl(cfg, app, { scope: SCOPE });
    const uid = await startInteraction(agent, auth.url);
    let updated: { status: number; body: any } | undefined;
    const signed = await grantHeldWhile(
      () => signInByCode(h, agent, uid, address),
      async () => {
        updated = await h.gql(
          `mutation($id: ID!) { updateOAuthClient(id: $id, input: {firstParty: false}) { __typename ... on UpdateOAuthClientPayload { client { firstParty } } } }`,
          { id: app.id },
        );
      },
    );
    expect(updated!.body.data?.updateOAuthClient, JSON.stringify(updated!.body)).toEqual({ __typename: "UpdateOAuthClientPayload", client: { firstParty: false } });

    await expectAppGotNothing(app, agent, auth, cfg, signed, user.accountId);
    expect((await approveApp(h, app, address, SCOPE)).consentAsked).toBe(true);
  });

  it("a sign-in on a remembered yes racing an unmerge, which withdraws the primary's consents, leaves the app nothing", async () => {
    const p = email("owner");
    const q = email("other");
    const owner = await h.signIn({ email: p });
    await h.signIn({ email: q });
    const req = await h.call("POST", "/users/link/request", { body: { email: q }, headers: asUser(owner.token) });
    const merged = await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp: await h.mailbox.otp(q) }, headers: asUser(owner.token) });
    expect(merged.body.outcome).toBe("merged");
    const app = await registerClient(h, { firstParty: false, name: "Partner" });
    expect((await approveApp(h, app, q, SCOPE)).consentAsked).toBe(true);

    // the owner's own sign-in, skipping the page on the yes the other person gave
    const cfg = await discover(h, app);
    const agent = new Agent(h);
    const auth = await authorizationUrl(cfg, app, { scope: SCOPE });
    const uid = await startInteraction(agent, auth.url);
    let unmerged: { status: number; body: any } | undefined;
    const signed = await grantHeldWhile(
      () => signInByCode(h, agent, uid, p),
      async () => {
        unmerged = await h.call("POST", "/users/link/unmerge", { body: {}, headers: asUser(owner.token) });
      },
    );
    expect(unmerged!.status, JSON.stringify(unmerged!.body)).toBe(200);

    await expectAppGotNothing(app, agent, auth, cfg, signed, owner.accountId);
    expect((await approveApp(h, app, p, SCOPE)).consentAsked).toBe(true);
  });
});
