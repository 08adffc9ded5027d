// An unmerge withdraws the primary's remembered app consents (docs/oidc.md, "Clients"): while
// merged, a sign-in with the secondary's address lands on the primary, so the other person may
// have given them. The attack (34th review): the secondary's holder approves a third-party app;
// the owner later signs in to that app with her own address and is not asked (the consent is
// remembered), so the app holds a refresh token on her account that no consent page of hers gave.
// The unmerge withdrew the consent, and "Apps you allowed" no longer listed the app, but its
// refresh token went on reading her e-mail address. Now the unmerge ends what third-party apps
// hold for the account on those consents; first-party apps keep theirs.
import * as client from "openid-client";
import { describe, expect, it } from "vitest";
import { backends, serverUrl } from "./support/db.ts";
import { lockHolder, waitingForLock } from "./support/locks.ts";
import { approveApp, oidcHarness, registerClient } from "./support/oidc.ts";

type OidcHarness = ReturnType<typeof oidcHarness>;

/** The owner signed in with `p`, having merged the account `q` signs into (a code to `q`). */
async function signedInMerged(h: OidcHarness["h"], p: string, q: string) {
  const owner = await h.signIn({ email: p });
  await h.signIn({ email: q });
  const headers = { authorization: `Bearer ${owner.token}` };
  const req = await h.call("POST", "/users/link/request", { body: { email: q }, headers });
  const done = await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp: await h.mailbox.otp(q) }, headers });
  expect(done.body.outcome).toBe("merged");
  return owner;
}

describe.each(backends)("an unmerge ends what third-party apps hold on the consents it withdraws, on %s", (backend) => {
  const { h, email, asUser, userinfo } = oidcHarness(backend);

  it("an app the secondary's holder approved loses the owner's refresh token; the owner's first-party app keeps hers", async () => {
    const p = email("owner");
    const q = email("other");
    const owner = await signedInMerged(h, p, q);

    const partner = await registerClient(h, { firstParty: false, name: "Partner" });
    expect((await approveApp(h, partner, q, "openid email offline_access")).consentAsked).toBe(true);
    const taken = await approveApp(h, partner, p, "openid email offline_access");
    expect(taken.consentAsked).toBe(false);
    const own = await approveApp(h, await registerClient(h, { firstParty: true, name: "Our app" }), p, "openid email offline_access");

    expect((await h.call("POST", "/users/link/unmerge", { body: {}, headers: asUser(owner.token) })).status).toBe(200);

    await expect(client.refreshTokenGrant(taken.cfg, taken.tokens.refresh_token!)).rejects.toMatchObject({ error: "invalid_grant" });
    expect((await userinfo(taken.tokens.access_token)).status).toBe(401);
    const kept = await client.refreshTokenGrant(own.cfg, own.tokens.refresh_token!);
    expect((await userinfo(kept.access_token)).body).toMatchObject({ email: p });

    // the owner is asked again, and what she allows then is listed and works
    const again = await approveApp(h, partner, p, "openid email offline_access");
    expect(again.consentAsked).toBe(true);
    expect((await userinfo(again.tokens.access_token)).body).toMatchObject({ email: p });
  });
});

// The owner withdraws an app (revokeOAuthConsent) while unmerging: the unmerge took the account,
// ended the session the app's grant is bound to (signed in with the secondary's address) and
// then came to the consent, which the withdrawal had locked before it came to end that same
// session: a deadlock until Postgres broke it after deadlock_timeout (1 s) and one was tried
// again. The withdrawal takes the account first now, as the unmerge does.
// Postgres only: a second connection holds the consent until the withdrawal, then the unmerge,
// wait; it then takes the session with NOWAIT, which the unmerge held while it waited.
describe.skipIf(!serverUrl)("an app withdrawn while the owner unmerges, on postgres", () => {
  const { h, email, asUser } = oidcHarness("postgres");
  const blocker = lockHolder(h);

  /** An owner who merged another account, whose holder then approved a third-party app. */
  async function mergedWithApp() {
    const p = email("owner");
    const q = email("other");
    const owner = await signedInMerged(h, p, q);
    const partner = await registerClient(h, { firstParty: false, name: "Partner" });
    const approved = await approveApp(h, partner, q, "openid email offline_access");
    const [{ session_id: appSession }] = (
      await blocker.query("SELECT session_id FROM oidc_payloads WHERE kind = 'Grant' AND payload->>'clientId' = $1", [partner.clientId])
    ).rows;
    return { owner, partner, approved, appSession: appSession as string };
  }

  /**
   * `other` (which changes the app's consents, then its grants and their sessions) comes to wait
   * for the consent the blocker holds, then the owner's unmerge comes to wait too; while both
   * wait, the app's session must be free (NOWAIT): the unmerge, holding it, deadlocked with `other`.
   */
  async function withTheUnmerge<T>(appSession: string, owner: { token: string }, clientId: string, other: () => Promise<T>) {
    await blocker.query("BEGIN");
    try {
      await blocker.query("SELECT 1 FROM oauth_consents WHERE client_id = $1 FOR UPDATE", [clientId]);
      const first = other();
      await waitingForLock(blocker, 1);
      const unmerging = h.call("POST", "/users/link/unmerge", { body: {}, headers: asUser(owner.token) });
      await waitingForLock(blocker, 2);
      await blocker.query("SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE NOWAIT", [appSession]);
      await blocker.query("COMMIT");
      return await Promise.all([first, unmerging]);
    } finally {
      await blocker.query("ROLLBACK").catch(() => {});
    }
  }

  it("the owner's withdrawal and unmerge take the account in turn, and both are done", async () => {
    const { owner, partner, approved, appSession } = await mergedWithApp();
    const [revoked, unmerged] = await withTheUnmerge(appSession, owner, partner.clientId, () =>
      h.gql(`mutation($c: String!) { revokeOAuthConsent(clientId: $c) { __typename } }`, { c: partner.clientId }, asUser(owner.token)),
    );
    expect(revoked.body).toEqual({ data: { revokeOAuthConsent: { __typename: "RevokeOAuthConsentPayload" } } });
    expect(unmerged.status).toBe(200);
    await expect(client.refreshTokenGrant(approved.cfg, approved.tokens.refresh_token!)).rejects.toMatchObject({ error: "invalid_grant" });
  });

  it("the project's deletion of the app and the owner's unmerge take the consent in turn, and both are done", async () => {
    const { owner, partner, appSession } = await mergedWithApp();
    const [deleted, unmerged] = await withTheUnmerge(appSession, owner, partner.clientId, () =>
      h.gql(`mutation($id: ID!) { deleteOAuthClient(id: $id) { __typename } }`, { id: partner.id }),
    );
    expect(deleted.body).toEqual({ data: { deleteOAuthClient: { __typename: "DeleteOAuthClientPayload" } } });
    expect(unmerged.status).toBe(200);
  });
});
