// Deleting an account removes what the user allowed apps on the consent page. The remembered
// "yes" (oauth_consents: the account, the app, its scopes and when) had no foreign key to the
// account and nothing else removed it: it outlived the account for good, though the retention
// sweep keeps nothing for ever (docs/operations.md, "Retention") and deleteAccount deletes the
// account with what it holds (README, "Account basics").
import { describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { approveApp, oidcHarness, registerClient } from "./support/oidc.ts";

describe.each(backends)("an account deleted, on %s", (backend) => {
  const { h, email, asUser } = oidcHarness(backend);

  it("takes the apps it allowed with it; another user's consent to the same app stays", async () => {
    const app = await registerClient(h, { firstParty: false, name: "Partner" });
    const [who, other] = [email("leaving"), email("staying")];
    await approveApp(h, app, who, "openid email");
    await approveApp(h, app, other, "openid");
    const leaving = await h.signIn({ email: who });
    const staying = await h.signIn({ email: other });
    expect(await h.db.prisma.oAuthConsent.count({ where: { accountId: leaving.accountId } })).toBe(1);

    const del = await h.gql(`mutation { deleteAccount { __typename } }`, {}, asUser(leaving.token));
    expect(del.body.data.deleteAccount.__typename, JSON.stringify(del.body)).toBe("DeleteAccountPayload");

    expect(await h.db.prisma.oAuthConsent.count({ where: { accountId: leaving.accountId } })).toBe(0);
    const kept = await h.gql(`{ viewer { authorizedApps { clientId } } }`, {}, asUser(staying.token));
    expect(kept.body.data.viewer.authorizedApps, JSON.stringify(kept.body)).toEqual([{ clientId: app.clientId }]);
  });
});
