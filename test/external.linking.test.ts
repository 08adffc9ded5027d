// Linking a signed-in account with an external identity (issue 27, docs/rest.md): the upstream's
// sign-in is the proof of ownership, and verify's decision table applies as for e-mail and phone:
// attach, merge, CannotLinkSelf, TargetSecondaryIdentity, TargetAlreadyLinked, AlreadyLinked.
// Every refusal is checked to change nothing; remove and unmerge give both sides back.
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startUpstreamOidc, type UpstreamUser } from "./support/upstream.ts";
import { addProvider, authorize, externalLink, externalSignIn, externalValue, externalWorldFor, snapshot, verifyLink, type Res, type Upstream } from "./support/upstream-linkgate.ts";

const tag = `t${randomBytes(3).toString("hex")}`;
let seq = 0;
const email = (name = "u") => `${name}-${tag}-${++seq}@example.com`;
const googleUser = (over: Partial<UpstreamUser> = {}): UpstreamUser => ({ sub: `g-${tag}-${++seq}`, email: email("g"), email_verified: true, name: "Grace", ...over });

const LINKED = { message: "Account linked successfully" };
type User = { token: string; accountId: string };

describe.each(backends)("linking external identities on %s", (backend) => {
  const { h, google, github, app } = externalWorldFor(backend, "https://app.example/linked");

  const auth = (u: User) => ({ authorization: `Bearer ${u.token}` });
  const mailUser = () => h.signIn({ email: email() });
  /** an account that signed up with this Google identity (its own identifier) */
  async function googleAccount(user = googleUser()): Promise<User & { user: UpstreamUser }> {
    google.loginAs(user);
    const r = await externalSignIn(h, google, "google", app.redirectUri);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return { token: r.body.access_token, accountId: r.body.account_id, user };
  }
  const link = (u: User, up: Upstream = google, slug = "google") => externalLink(h, up, slug, app.redirectUri, u.token);
  async function linked(u: User, outcome: "attached" | "merged", up: Upstream = google, slug = "google") {
    const r = await link(u, up, slug);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({ ...LINKED, outcome });
  }
  async function refused(u: User, status: number, error: string) {
    const before = await snapshot(h);
    const r = await link(u);
    expect(r.status, JSON.stringify(r.body)).toBe(status);
    expect(r.body).toEqual({ error, message: expect.any(String) });
    expect(await snapshot(h)).toEqual(before);
  }
  const identifiersOf = async (accountId: string) =>
    (await h.db.prisma.identifier.findMany({ where: { accountId }, orderBy: { createdAt: "asc" } })).map((i) => `${i.origin}:${i.kind}:${i.value}`);
  const post = (u: User, route: string, body: unknown): Promise<Res> => h.call("POST", `/users/link/${route}`, { body, headers: auth(u) });
  const signsInto = async (user: UpstreamUser) => {
    google.loginAs(user);
    const r = await externalSignIn(h, google, "google", app.redirectUri);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body.account_id as string;
  };

  it("attaches an unused identity; it then signs into the account", async () => {
    const u = await mailUser();
    const g = googleUser();
    google.loginAs(g);
    await linked(u, "attached");
    expect((await identifiersOf(u.accountId)).slice(1)).toEqual([`attached:external:${externalValue(google, g.sub)}`]);
    expect(await signsInto(g)).toBe(u.accountId);
  });

  it("attaches a GitHub identity too", async () => {
    const u = await mailUser();
    const gh = { id: 700_000 + ++seq, login: `cat${seq}`, name: null, email: null, emails: [{ email: email("gh"), primary: true, verified: true, visibility: "private" as const }] };
    github.loginAs(gh);
    await linked(u, "attached", github, "github");
    expect((await identifiersOf(u.accountId)).slice(1)).toEqual([expect.stringMatching(new RegExp(`^attached:external:.+#${gh.id}$`))]);
  });

  it("an identity that is another account's own merges that account in; unmerge restores both", async () => {
    const secondary = await googleAccount();
    const secondaryBefore = await identifiersOf(secondary.accountId);
    const primary = await mailUser();
    google.loginAs(secondary.user);
    await linked(primary, "merged");
    expect(await signsInto(secondary.user)).toBe(primary.accountId);
    const viewer = await h.gql("{ viewer { id mergeRole mergedSecondary { id } } }", {}, auth(primary));
    expect(viewer.body.data.viewer).toMatchObject({ id: primary.accountId, mergeRole: "primary", mergedSecondary: { id: secondary.accountId } });

    const r = await post(primary, "unmerge", {});
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(await identifiersOf(secondary.accountId)).toEqual(secondaryBefore);
    expect(await signsInto(secondary.user)).toBe(secondary.accountId);
    expect((await identifiersOf(primary.accountId)).some((i) => i.includes(":external:"))).toBe(false);
  });

  describe("refusals change nothing", () => {
    it("CannotLinkSelf: the identity is already this account's, or its merged secondary's", async () => {
      const own = await googleAccount();
      google.loginAs(own.user);
      await refused(own, 409, "CannotLinkSelf");

      const u = await mailUser();
      google.loginAs(googleUser());
      await linked(u, "attached");
      await refused(u, 409, "CannotLinkSelf");

      const secondary = await googleAccount();
      const primary = await mailUser();
      google.loginAs(secondary.user);
      await linked(primary, "merged");
      await refused(primary, 409, "CannotLinkSelf");
    });

    it("TargetSecondaryIdentity: the identity is attached to another account", async () => {
      const holder = await mailUser();
      const g = googleUser();
      google.loginAs(g);
      await linked(holder, "attached");
      const other = await mailUser();
      google.loginAs(g);
      await refused(other, 409, "TargetSecondaryIdentity");
    });

    it("TargetAlreadyLinked: the identity's account is merged (as primary or as secondary)", async () => {
      // as secondary
      const secondary = await googleAccount();
      const primary = await mailUser();
      google.loginAs(secondary.user);
      await linked(primary, "merged");
      const third = await mailUser();
      google.loginAs(secondary.user);
      await refused(third, 409, "TargetAlreadyLinked");

      // as primary: an account signed up with Google that merged another in
      const googlePrimary = await googleAccount();
      const merged = await googleAccount();
      google.loginAs(merged.user);
      await linked(googlePrimary, "merged");
      google.loginAs(googlePrimary.user);
      await refused(third, 409, "TargetAlreadyLinked");
    });

    it("AlreadyLinked: this account is merged already and the identity is another's own", async () => {
      const first = await googleAccount();
      const primary = await mailUser();
      google.loginAs(first.user);
      await linked(primary, "merged");
      const second = await googleAccount();
      google.loginAs(second.user);
      await refused(primary, 409, "AlreadyLinked");
      // attaching an unused identity stays allowed while merged
      google.loginAs(googleUser());
      await linked(primary, "attached");
    });

    it("a wrong, reused or foreign code or state: 400 OTPInvalid", async () => {
      const u = await mailUser();
      const other = await mailUser();
      google.loginAs(googleUser());
      const { started, code } = await authorize(h, google, "google", app.redirectUri, { token: u.token });
      const before = await snapshot(h);
      for (const [stateId, c] of [
        [started.state_id, "not-the-code"],
        ["nope", code],
      ]) {
        const r = await verifyLink(h, u.token, stateId, c);
        expect(r.status).toBe(400);
        expect(r.body).toEqual({ error: "OTPInvalid", message: expect.any(String) });
      }
      // another user's token cannot use this user's state and code
      const stolen = await verifyLink(h, other.token, started.state_id, code);
      expect(stolen.status).toBe(400);
      expect(await snapshot(h)).toEqual(before);

      expect((await verifyLink(h, u.token, started.state_id, code)).body).toEqual({ ...LINKED, outcome: "attached" });
      // the same state and code again: the same success (as verify of a code), nothing more
      // (the retry stores the same claims again, so only their updatedAt may move)
      const claimsAgain = async () => {
        const snap = await snapshot(h);
        return { ...snap, externalIdentities: snap.externalIdentities.map(({ updatedAt: _, ...rest }) => rest) };
      };
      const after = await claimsAgain();
      expect((await verifyLink(h, u.token, started.state_id, code)).body).toEqual({ ...LINKED, outcome: "attached" });
      expect(await claimsAgain()).toEqual(after);
    });

    it("a link started by one session is OTPInvalid for another session of the account, and stays good for its own", async () => {
      const u = await mailUser();
      const own = (await h.db.prisma.identifier.findFirstOrThrow({ where: { accountId: u.accountId } })).value;
      const other = await h.signIn({ email: own });
      google.loginAs(googleUser());
      const { started, code } = await authorize(h, google, "google", app.redirectUri, { token: u.token });
      const before = await snapshot(h);
      const r = await verifyLink(h, other.token, started.state_id, code);
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body).toEqual({ error: "OTPInvalid", message: expect.any(String) });
      expect(await snapshot(h)).toEqual(before);
      expect((await verifyLink(h, u.token, started.state_id, code)).body).toEqual({ ...LINKED, outcome: "attached" });
    });

    it("a sign-in state cannot finish a link, and a link state cannot finish a sign-in", async () => {
      const u = await mailUser();
      google.loginAs(googleUser());
      const signIn = await authorize(h, google, "google", app.redirectUri);
      const before = await snapshot(h);
      expect((await verifyLink(h, u.token, signIn.started.state_id, signIn.code)).status).toBe(400);
      const linkFlow = await authorize(h, google, "google", app.redirectUri, { token: u.token });
      const c = await h.call("POST", "/auth/external/complete", { body: { state_id: linkFlow.started.state_id, code: linkFlow.code } });
      expect(c.status).toBe(400);
      expect(await snapshot(h)).toEqual(before);
    });
  });

  describe("remove", () => {
    it("removes an attached identity: it then signs up a new account", async () => {
      const u = await mailUser();
      const g = googleUser();
      google.loginAs(g);
      await linked(u, "attached");
      const r = await post(u, "remove", { external: externalValue(google, g.sub) });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(await identifiersOf(u.accountId)).toHaveLength(1);
      expect(await signsInto(g)).not.toBe(u.accountId);
    });

    it("an account keeps one identifier it can sign in with: LastIdentifier", async () => {
      const only = await googleAccount();
      const before = await snapshot(h);
      const r = await post(only, "remove", { external: externalValue(google, only.user.sub) });
      expect(r.status).toBe(409);
      expect(r.body.error).toBe("LastIdentifier");
      expect(await snapshot(h)).toEqual(before);
    });

    it("an identity of a provider since pointed at another issuer does not count: it no longer signs in (LastIdentifier)", async () => {
      const workforce = await startUpstreamOidc();
      try {
        const { id } = await addProvider(h, workforce, "workforce");
        const u = await mailUser();
        const g = googleUser();
        workforce.loginAs(g);
        await linked(u, "attached", workforce, "workforce");
        // renamed, it still signs in its identities: they count
        const other = await mailUser();
        workforce.loginAs(googleUser());
        await linked(other, "attached", workforce, "workforce");
        const update = (input: object) =>
          h.gql(`mutation($id: ID!, $input: IdentityProviderInput!) { updateIdentityProvider(id: $id, input: $input) { __typename } }`, { id, input });
        expect((await update({ displayName: "Workforce" })).body.data.updateIdentityProvider.__typename).toBe("IdentityProvider");
        const [otherMail] = await identifiersOf(other.accountId);
        const kept = await post(other, "remove", { email: otherMail.replace(/^own:email:/, "") });
        expect(kept.status, JSON.stringify(kept.body)).toBe(200);
        // the admin moves the provider to another issuer (another tenant, another instance)
        const moved = await update({ issuer: google.issuer, clientId: google.clientId, clientSecret: google.clientSecret });
        expect(moved.body.data.updateIdentityProvider.__typename).toBe("IdentityProvider");
        const [callbackUrl] = (await h.gql(`{ identityProviders { id callbackUrl } }`)).body.data.identityProviders.filter((p: { id: string }) => p.id === id).map((p: { callbackUrl: string }) => p.callbackUrl);
        google.addRedirectUri(callbackUrl);
        // the same user at the provider now signs in as another identity, a new account
        google.loginAs(g);
        const again = await externalSignIn(h, google, "workforce", app.redirectUri);
        expect(again.status, JSON.stringify(again.body)).toBe(200);
        expect(again.body.account_id).not.toBe(u.accountId);
        // so the account's address is the last thing it can sign in with
        const [mail] = await identifiersOf(u.accountId);
        const before = await snapshot(h);
        const r = await post(u, "remove", { email: mail.replace(/^own:email:/, "") });
        expect(r.status, JSON.stringify(r.body)).toBe(409);
        expect(r.body.error).toBe("LastIdentifier");
        expect(await snapshot(h)).toEqual(before);
      } finally {
        await workforce.stop();
      }
    });

    it("removing the merged secondary's identity separates the accounts", async () => {
      const secondary = await googleAccount();
      const primary = await mailUser();
      google.loginAs(secondary.user);
      await linked(primary, "merged");
      const r = await post(primary, "remove", { external: externalValue(google, secondary.user.sub) });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(await signsInto(secondary.user)).toBe(secondary.accountId);
    });

    it("an identity not on the account: IdentifierNotLinked", async () => {
      const u = await mailUser();
      const r = await post(u, "remove", { external: externalValue(google, "nobody") });
      expect(r.status).toBe(409);
      expect(r.body.error).toBe("IdentifierNotLinked");
    });
  });
});
