// An app made third-party keeps only what the user approved on its consent page (docs/oidc.md,
// "Clients"). The attack (34th review): a partner app the user had approved for `openid` alone is
// made first-party for a while; signing in through it then skips the consent page, and the app
// takes `email phone offline_access`. Made third-party again, it kept that grant because the
// user had said yes to *something*: its 30-day refresh token went on reading the e-mail address
// and phone number at userinfo, while "Apps you allowed" showed `openid` only. A grant now stays
// only when the remembered consent covers every scope it carries.
import { decodeJwt } from "jose";
import * as client from "openid-client";
import { describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { approveApp, oidcHarness, registerClient } from "./support/oidc.ts";

const SET_FIRST_PARTY = `mutation($id: ID!, $firstParty: Boolean!) { updateOAuthClient(id: $id, input: { firstParty: $firstParty }) { __typename } }`;

describe.each(backends)("an app made third-party keeps only the scopes its consent page gave it, on %s", (backend) => {
  const { h, email, asUser, userinfo } = oidcHarness(backend);
  const setFirstParty = (id: string, firstParty: boolean) => h.gql(SET_FIRST_PARTY, { id, firstParty });

  it("a grant for more than the user approved, taken while first-party, ends with its session; the approved one stays", async () => {
    const who = email("owner");
    const owner = await h.signIn({ email: who });
    const app = await registerClient(h, { firstParty: false, name: "Partner" });
    const approved = await approveApp(h, app, who, "openid offline_access");
    expect(approved.consentAsked).toBe(true);

    await setFirstParty(app.id, true);
    const taken = await approveApp(h, app, who, "openid email phone offline_access");
    expect(taken.consentAsked).toBe(false);
    expect((await userinfo(taken.tokens.access_token)).body).toMatchObject({ email: who });

    await setFirstParty(app.id, false);
    await expect(client.refreshTokenGrant(taken.cfg, taken.tokens.refresh_token!)).rejects.toMatchObject({ error: "invalid_grant" });
    expect((await userinfo(taken.tokens.access_token)).status).toBe(401);
    const session = await h.db.prisma.session.findUnique({ where: { id: decodeJwt(taken.tokens.access_token).sid as string } });
    expect(session?.endedAt).not.toBeNull();

    // what the consent page gave stays, and is what the user sees listed
    const refreshed = await client.refreshTokenGrant(approved.cfg, approved.tokens.refresh_token!);
    expect((await userinfo(refreshed.access_token)).body).toEqual({ sub: owner.accountId });
    const listed = await h.gql(`{ viewer { authorizedApps { clientId scopes } } }`, {}, asUser(owner.token));
    expect(listed.body.data.viewer.authorizedApps).toEqual([{ clientId: app.clientId, scopes: ["openid", "offline_access"] }]);
  });

  it("a grant taken while first-party within what the user approved stays", async () => {
    const who = email("covered");
    await h.signIn({ email: who });
    const app = await registerClient(h, { firstParty: false });
    expect((await approveApp(h, app, who, "openid email offline_access")).consentAsked).toBe(true);

    await setFirstParty(app.id, true);
    const within = await approveApp(h, app, who, "openid email offline_access");
    await setFirstParty(app.id, false);
    const refreshed = await client.refreshTokenGrant(within.cfg, within.tokens.refresh_token!);
    expect((await userinfo(refreshed.access_token)).body).toMatchObject({ email: who });
  });
});
