// A consent page answered after its session ended remembers nothing (docs/oidc.md, first- and
// third-party clients).
// 32nd review: whoever held a merged secondary's address signed in inside a third-party app's
// authorization (landing on the owner's primary) and left the consent page open; the owner
// unmerged, which withdrew the primary's remembered consents and ended that session; the "allow"
// sent afterwards wrote the consent back, and the owner's next sign-in to the app skipped the
// consent page, handing the app her e-mail and a refresh token she was never asked about.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";
import { Agent, approveApp, authorizationUrl, discover, ORIGIN, registerClient, signInByCode, startInteraction, type RegisteredClient } from "./support/oidc.ts";

const SCOPE = "openid email offline_access";

describe.each(backends)("a consent page answered after its session ended, on %s", (backend) => {
  let h: Harness;
  let n = 0;
  const email = (who: string) => `${who}.consent.${++n}@example.com`;
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_ISSUER: ORIGIN } });
  });
  afterAll(() => h?.close());

  /** A third-party app's consent page, reached by signing in with `address` inside its authorization. */
  async function consentPageOf(app: RegisteredClient, address: string) {
    const agent = new Agent(h);
    const auth = await authorizationUrl(await discover(h, app), app, { scope: SCOPE });
    const uid = await startInteraction(agent, auth.url);
    const signed = await signInByCode(h, agent, uid, address);
    expect(signed.body.consent, JSON.stringify(signed.body)).toBeTruthy();
    return { allow: () => agent.json(`/oauth/interaction/${uid}/consent`, { allow: true }) };
  }

  const liveConsents = (accountId: string) => h.db.prisma.oAuthConsent.count({ where: { accountId, revokedAt: null } });

  it("left open by the secondary's holder and answered after the unmerge: refused, and the owner is asked again", async () => {
    const secondaryMail = email("secondary");
    const ownerMail = email("owner");
    const owner = await h.signIn({ email: ownerMail });
    await h.signIn({ email: secondaryMail });
    const req = await h.call("POST", "/users/link/request", { body: { email: secondaryMail }, headers: bearer(owner.token) });
    const merged = await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp: await h.mailbox.otp(secondaryMail) }, headers: bearer(owner.token) });
    expect(merged.body.outcome).toBe("merged");

    const app = await registerClient(h, { firstParty: false });
    const page = await consentPageOf(app, secondaryMail);
    const unmerged = await h.call("POST", "/users/link/unmerge", { body: {}, headers: bearer(owner.token) });
    expect(unmerged.status, JSON.stringify(unmerged.body)).toBe(200);

    const late = await page.allow();
    expect([late.status, late.body.error], JSON.stringify(late.body)).toEqual([400, "InvalidRequest"]);
    expect(await liveConsents(owner.accountId)).toBe(0);
    expect((await approveApp(h, app, ownerMail, SCOPE)).consentAsked).toBe(true);
  });

  it("after the user ended that session: refused, nothing remembered; a live one is remembered", async () => {
    const address = email("user");
    const app = await registerClient(h, { firstParty: false });
    const user = await h.signIn({ email: address });

    const page = await consentPageOf(app, address);
    // the user ends that session from the one she signed in with first, as /account does
    const session = await h.db.prisma.session.findFirstOrThrow({ where: { accountId: user.accountId, endedAt: null }, orderBy: { createdAt: "desc" } });
    const ended = await h.gql(`mutation($id: ID!) { endSession(id: $id) { __typename } }`, { id: session.id }, { ...bearer(user.token), "x-api-key": h.publishableKey });
    expect(ended.body.errors, JSON.stringify(ended.body)).toBeUndefined();
    expect(await h.db.prisma.session.findUniqueOrThrow({ where: { id: session.id } })).toMatchObject({ endedAt: expect.any(Date) });
    const late = await page.allow();
    expect([late.status, late.body.error], JSON.stringify(late.body)).toEqual([400, "InvalidRequest"]);
    expect(await liveConsents(user.accountId)).toBe(0);

    const live = await consentPageOf(app, address);
    const allowed = await live.allow();
    expect(allowed.status, JSON.stringify(allowed.body)).toBe(200);
    expect(await liveConsents(user.accountId)).toBe(1);
  });
});
