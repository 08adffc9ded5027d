// Signing in with an external identity (issue 27, docs/rest.md) end to end, against real
// upstreams on loopback (test/support/upstream.ts): an OpenID Connect provider acting as Google
// and an imitation of GitHub. The identifier is (issuer, subject), never an e-mail: a verified
// e-mail claim that an account holds asks for that e-mail's code first, an unverified one never
// links. The database, the outbox and the mailbox are the witnesses.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { decodeJwt } from "jose";
import { describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { receivableByOthers } from "../src/auth/redirect-uris.ts";
import { ORIGIN, registerClient } from "./support/oidc.ts";
import { startUpstreamOidc, type GithubUser, type UpstreamUser } from "./support/upstream.ts";
import { addProvider, authorize, callback, complete, confirm, externalSignIn, externalValue, externalWorldFor, freshAddress, landing, snapshot, start, type Res } from "./support/upstream-linkgate.ts";

const tag = `t${randomBytes(3).toString("hex")}`;
let seq = 0;
const email = (name = "u") => `${name}-${tag}-${++seq}@example.com`;
const googleUser = (over: Partial<UpstreamUser> = {}): UpstreamUser => ({ sub: `g-${tag}-${++seq}`, email: email("g"), email_verified: true, name: "Grace Hopper", ...over });
const githubUser = (over: Partial<GithubUser> = {}): GithubUser => {
  const mail = email("gh");
  return { id: 100_000 + ++seq, login: `octo${seq}`, name: "Octo Cat", email: null, emails: [{ email: mail, primary: true, verified: true, visibility: "private" }], ...over };
};

describe.each(backends)("external sign-in on %s", (backend) => {
  const { h, google, github, app } = externalWorldFor(backend, "https://app.example/after-sign-in");

  const signedIn = (r: Res) => {
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ access_token: expect.any(String), id_token: expect.any(String), token_type: "Bearer", account_id: expect.any(String) });
    return r.body as { access_token: string; id_token: string; account_id: string };
  };
  const identifiersOf = async (accountId: string) =>
    (await h.db.prisma.identifier.findMany({ where: { accountId }, orderBy: { createdAt: "asc" } })).map((i) => `${i.origin}:${i.kind}:${i.value}`);
  const lastSeq = async () => (await h.db.prisma.outboxEvent.findFirst({ orderBy: { seq: "desc" } }))?.seq ?? 0n;
  const eventsSince = async (after: bigint) =>
    (await h.db.prisma.outboxEvent.findMany({ where: { seq: { gt: after } }, orderBy: { seq: "asc" } })).map((e) => ({ type: e.eventType, data: JSON.parse(e.body).data }));
  const google$ = () => externalSignIn(h, google, "google", app.redirectUri);
  /** The message with a code to `to`, once it arrived (bounded: 5 s), left for mailbox.otp to read. */
  const codeMessageTo = async (to: string) => {
    for (let i = 0; i < 500; i++) {
      const m = h.mailbox.messages.find((m) => m.to === to && /Your code is/.test(m.text));
      if (m) return m;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`no code to ${to}`);
  };
  const github$ = () => externalSignIn(h, github, "github", app.redirectUri);

  it("refuses a provider name with control characters: it is shown on pages and in mail to users", async () => {
    const r = await h.gql(`mutation($input: IdentityProviderInput!) { createIdentityProvider(input: $input) { __typename ... on Error { message } } }`, {
      input: { preset: "OIDC", slug: "odd-name", displayName: "Goo\u001b[31mgle\r\nBcc: x@example.com", issuer: google.issuer, clientId: "c", clientSecret: "s" },
    });
    expect(r.body.data.createIdentityProvider).toEqual({ __typename: "InvalidRequest", message: "displayName must not contain control or bidirectional override characters" });
    const create = (input: object) =>
      h.gql(`mutation($input: IdentityProviderInput!) { createIdentityProvider(input: $input) { __typename ... on Error { message } } }`, {
        input: { preset: "OIDC", issuer: google.issuer, clientId: "c", clientSecret: "s", ...input },
      });
    // a right-to-left override would show the name reversed on the pages
    expect((await create({ slug: "odd-name", displayName: "Google \u202eelgooG" })).body.data.createIdentityProvider.__typename).toBe("InvalidRequest");
    // "Continue with ​" on the sign-in page
    expect((await create({ slug: "odd-name", displayName: "\u200b" })).body.data.createIdentityProvider).toEqual({ __typename: "InvalidRequest", message: "displayName must hold a character that shows" });
    expect(await h.db.prisma.identityProvider.count({ where: { slug: "odd-name" } })).toBe(0);
    // a secret pasted with its line end is trimmed, as always
    expect((await create({ slug: "pasted", displayName: "Pasted", clientSecret: "s3cret\n" })).body.data.createIdentityProvider.__typename).toBe("IdentityProvider");
    await h.db.prisma.identityProvider.deleteMany({ where: { slug: "pasted" } });
  });

  it("lists the project's providers for the sign-in page", async () => {
    const r = await h.call("GET", "/auth/external/providers", { headers: { "x-api-key": h.publishableKey } });
    expect(r.status).toBe(200);
    expect(r.body.providers).toEqual([
      { slug: "google", display_name: "Google", preset: "oidc" },
      { slug: "github", display_name: "GitHub", preset: "github" },
    ]);
  });

  it("an unknown Google identity creates an account identified by (issuer, subject); signing in again lands on it", async () => {
    const user = googleUser();
    google.loginAs(user);
    const since = await lastSeq();
    const first = signedIn(await google$());
    expect(await identifiersOf(first.account_id)).toEqual([`own:external:${externalValue(google, user.sub)}`]);
    expect(decodeJwt(first.id_token)).toMatchObject({ sub: first.account_id, amr: ["fed"] });
    const events = await eventsSince(since);
    expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(["user.created", "user.authentication.success"]));
    expect(events.find((e) => e.type === "user.authentication.success")!.data).toMatchObject({ user: { user_id: first.account_id }, method: "external", provider: "google" });

    const accounts = await h.db.prisma.account.count();
    const again = signedIn(await google$());
    expect(again.account_id).toBe(first.account_id);
    expect(await h.db.prisma.account.count()).toBe(accounts);
    // the token works on linkgate's API as the account
    const viewer = await h.gql("{ viewer { id } }", {}, { authorization: `Bearer ${again.access_token}` });
    expect(viewer.body.data.viewer.id).toBe(first.account_id);
  });

  it("Apple: the answer comes as a form post; the name posted beside it is kept, the e-mail in that unsigned field is not", async () => {
    const apple = await startUpstreamOidc();
    try {
      const { id: appleId } = await addProvider(h, apple, "apple", { preset: "APPLE", displayName: "Apple" });
      // as Apple's ID token: no name claim
      const user: UpstreamUser = { sub: `a-${tag}-${++seq}`, email: email("a"), email_verified: true };
      apple.loginAs(user);
      const s = await start(h, "apple", app.redirectUri);
      expect(new URL(s.body.authorization_url).searchParams.get("response_mode")).toBe("form_post");
      const { action, fields } = await apple.formPostAuthorization(s.body.authorization_url);
      expect(action.pathname).toBe(`/auth/external/${appleId}/callback`);
      // what Apple adds on a user's first authorization, unsigned
      fields.set("user", JSON.stringify({ name: { firstName: "Ada", lastName: "Lovelace" }, email: email("someone-else") }));
      const posted = new Request(action, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: fields.toString() });
      const back = landing(await h.app.fetch(posted, { incoming: { socket: { remoteAddress: freshAddress() } } }));
      const signed = signedIn(await complete(h, s.body.state_id, back.code!));
      const account = await h.db.prisma.account.findUniqueOrThrow({ where: { id: signed.account_id }, include: { identifiers: { include: { external: true } } } });
      expect(account.name).toBe("Ada Lovelace");
      expect(account.identifiers.map((i) => i.value)).toEqual([externalValue(apple, user.sub)]);
      expect(account.identifiers[0].external).toMatchObject({ name: "Ada Lovelace", email: user.email, emailVerified: true });
    } finally {
      await apple.stop();
    }
  });

  it("a changed e-mail at the upstream is the same identity: the claim is profile only", async () => {
    const user = googleUser();
    google.loginAs(user);
    const first = signedIn(await google$());
    google.loginAs({ ...user, email: email("changed") });
    expect(signedIn(await google$()).account_id).toBe(first.account_id);
    expect(await identifiersOf(first.account_id)).toEqual([`own:external:${externalValue(google, user.sub)}`]);
  });

  it("GitHub: an unknown user creates an account identified by its numeric id; again lands on it", async () => {
    const user = githubUser();
    github.loginAs(user);
    const first = signedIn(await github$());
    expect(await identifiersOf(first.account_id)).toEqual([expect.stringMatching(new RegExp(`^own:external:.+#${user.id}$`))]);
    // a renamed login is the same GitHub user
    github.loginAs({ ...user, login: `renamed${user.id}` });
    expect(signedIn(await github$()).account_id).toBe(first.account_id);
  });

  it("a merged secondary's external identity signs into the primary", async () => {
    const user = googleUser();
    google.loginAs(user);
    const secondary = signedIn(await google$());
    const primary = await h.signIn({ email: email("primary") });
    // the primary links the secondary's own identifier, the Google identity: a merge
    const linked = await externalLinkAsPrimary(primary.token);
    expect(linked.body).toEqual({ message: "Account linked successfully", outcome: "merged" });
    const after = signedIn(await google$());
    expect(after.account_id).toBe(primary.accountId);
    expect(decodeJwt(after.id_token).sub).toBe(primary.accountId);
    expect(secondary.account_id).not.toBe(primary.accountId);
  });
  async function externalLinkAsPrimary(token: string) {
    const { started, code } = await authorize(h, google, "google", app.redirectUri, { token });
    return h.call("POST", "/users/link/external/verify", { body: { state_id: started.state_id, code }, headers: { authorization: `Bearer ${token}` } });
  }

  describe("a verified e-mail that an account holds", () => {
    it("creates and links nothing until that e-mail's code is given, then attaches the identity to that account", async () => {
      const holder = await h.signIn({ email: email("holder") });
      const mail = (await h.db.prisma.identifier.findFirstOrThrow({ where: { accountId: holder.accountId, kind: "email" } })).value;
      const user = googleUser({ email: mail, email_verified: true });
      google.loginAs(user);

      const { started, code } = await authorize(h, google, "google", app.redirectUri);
      const before = await snapshot(h);
      const asked = await complete(h, started.state_id, code);
      expect(asked.status, JSON.stringify(asked.body)).toBe(200);
      expect(asked.body).toEqual({ verification_required: "email", state_id: expect.any(String), destination: expect.stringContaining("•") });
      // the code's message names the service being connected: an owner asked to read it out can tell
      expect((await codeMessageTo(mail)).subject).toBe("Confirm it's you to connect your Google sign-in");
      expect(asked.body).not.toHaveProperty("access_token");
      const after = await snapshot(h);
      expect({ ...after, userEvents: undefined }).toEqual({ ...before, userEvents: undefined });

      // a wrong code attaches nothing
      const otp = await h.mailbox.otp(mail);
      const wrong = await confirm(h, asked.body.state_id, otp === "000000" ? "111111" : "000000");
      expect(wrong.status).toBe(400);
      expect(await identifiersOf(holder.accountId)).toEqual([`own:email:${mail}`]);

      const verified = signedIn(await confirm(h, asked.body.state_id, otp));
      expect(verified.account_id).toBe(holder.accountId);
      expect(await identifiersOf(holder.accountId)).toEqual([`own:email:${mail}`, `attached:external:${externalValue(google, user.sub)}`]);
      // from now on the identity signs in directly
      expect(signedIn(await google$()).account_id).toBe(holder.accountId);
    });

    it("five wrong codes end the confirmation with otp_attempts_exhausted, whose purpose docs/events.md lists", async () => {
      const holder = await h.signIn({ email: email("holder") });
      const mail = (await h.db.prisma.identifier.findFirstOrThrow({ where: { accountId: holder.accountId, kind: "email" } })).value;
      google.loginAs(googleUser({ email: mail }));
      const { started, code } = await authorize(h, google, "google", app.redirectUri);
      const asked = await complete(h, started.state_id, code);
      const otp = await h.mailbox.otp(mail);
      const from = await lastSeq();
      for (let i = 0; i < 5; i++) expect((await confirm(h, asked.body.state_id, otp === "000000" ? "111111" : "000000")).status).toBe(400);
      const alarms = (await eventsSince(from)).filter((e) => e.type === "security.suspicious_activity");
      expect(alarms).toEqual([{ type: "security.suspicious_activity", data: expect.objectContaining({ reason: "otp_attempts_exhausted", state_id: asked.body.state_id }) }]);
      // a receiver handles the purposes the reasons table names, and no other
      const row = readFileSync(new URL("../docs/events.md", import.meta.url), "utf8").split("\n").find((l) => l.startsWith("| `otp_attempts_exhausted` |"))!;
      const purposes = [.../`purpose` \(([^)]*)\)/.exec(row)![1].matchAll(/`([a-z_]+)`/g)].map((m) => m[1]);
      expect(purposes).toContain(alarms[0].data.purpose);
      expect(alarms[0].data).not.toHaveProperty("user_id");
    });

    it("an abandoned verification leaves no account and no link; the next sign-in asks again", async () => {
      const holder = await h.signIn({ email: email("holder") });
      const mail = (await h.db.prisma.identifier.findFirstOrThrow({ where: { accountId: holder.accountId, kind: "email" } })).value;
      google.loginAs(googleUser({ email: mail }));
      expect((await google$()).body.verification_required).toBe("email");
      await h.mailbox.otp(mail);
      expect((await google$()).body.verification_required).toBe("email");
      await h.mailbox.otp(mail);
      expect(await identifiersOf(holder.accountId)).toEqual([`own:email:${mail}`]);
    });

    it("a code that could not be sent (the mail server down: 503) is asked for again by a retry of the same completion", async () => {
      const holder = await h.signIn({ email: email("retried") });
      const mail = (await h.db.prisma.identifier.findFirstOrThrow({ where: { accountId: holder.accountId, kind: "email" } })).value;
      google.loginAs(googleUser({ email: mail, email_verified: true }));
      const { started, code } = await authorize(h, google, "google", app.redirectUri);
      h.mailbox.refuse(mail, 451);
      const down = await complete(h, started.state_id, code);
      expect(down.status).toBe(503);
      h.mailbox.accept(mail);
      const asked = await complete(h, started.state_id, code);
      expect(asked.status, JSON.stringify(asked.body)).toBe(200);
      expect(asked.body.verification_required).toBe("email");
      // and a retry once it was sent answers the same, without another code
      expect((await complete(h, started.state_id, code)).body).toEqual(asked.body);
      const verified = signedIn(await confirm(h, asked.body.state_id, await h.mailbox.otp(mail)));
      expect(verified.account_id).toBe(holder.accountId);
    });

    it("parallel completions of one flow send one code", async () => {
      const holder = await h.signIn({ email: email("parallel") });
      const mail = (await h.db.prisma.identifier.findFirstOrThrow({ where: { accountId: holder.accountId, kind: "email" } })).value;
      google.loginAs(googleUser({ email: mail, email_verified: true }));
      const { started, code } = await authorize(h, google, "google", app.redirectUri);
      const tried = h.mailbox.tries(mail);
      const all = await Promise.all(Array.from({ length: 4 }, () => complete(h, started.state_id, code)));
      expect(all.filter((r) => r.status === 200 && r.body.verification_required === "email").length).toBeGreaterThanOrEqual(1);
      for (const r of all) expect([200, 400]).toContain(r.status);
      expect(h.mailbox.tries(mail) - tried).toBe(1);
    });

    it("the address spelled with capitals or surrounding spaces is the same address: its code is asked for, nothing is created", async () => {
      const holder = await h.signIn({ email: email("spelled") });
      const mail = (await h.db.prisma.identifier.findFirstOrThrow({ where: { accountId: holder.accountId, kind: "email" } })).value;
      for (const spelled of [mail.toUpperCase(), ` ${mail}`, `${mail}\n`, ` ${mail.toUpperCase()} `]) {
        google.loginAs(googleUser({ email: spelled, email_verified: true }));
        const accounts = await h.db.prisma.account.count();
        const r = await google$();
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        expect(r.body, JSON.stringify(spelled)).toEqual({ verification_required: "email", state_id: expect.any(String), destination: expect.stringContaining("•") });
        await h.mailbox.otp(mail);
        expect(await h.db.prisma.account.count()).toBe(accounts);
      }
    });

    // compared as sent, a claim with the domain in Unicode made a second account for an address
    // held in its punycode form, without its code
    it("the domain spelled in Unicode is the same address as its punycode: its code is asked for, nothing is created", async () => {
      const local = `unicode-${tag}`;
      const holder = await h.signIn({ email: `${local}@xn--bcher-kva.example` });
      for (const spelled of [`${local}@bücher.example`, `${local.toUpperCase()}@BU\u0308CHER.EXAMPLE`]) {
        google.loginAs(googleUser({ email: spelled, email_verified: true }));
        const accounts = await h.db.prisma.account.count();
        const r = await google$();
        expect(r.body, JSON.stringify(spelled)).toEqual({ verification_required: "email", state_id: expect.any(String), destination: expect.stringContaining("•") });
        const verified = signedIn(await confirm(h, r.body.state_id, await h.mailbox.otp(`${local}@xn--bcher-kva.example`)));
        expect(verified.account_id).toBe(holder.accountId);
        expect(await h.db.prisma.account.count()).toBe(accounts);
        await h.db.prisma.identifier.deleteMany({ where: { accountId: holder.accountId, kind: "external" } });
      }
    });

    it("GitHub: the verified primary e-mail from /user/emails counts, the same way", async () => {
      const holder = await h.signIn({ email: email("ghholder") });
      const mail = (await h.db.prisma.identifier.findFirstOrThrow({ where: { accountId: holder.accountId, kind: "email" } })).value;
      github.loginAs(githubUser({ emails: [{ email: mail, primary: true, verified: true, visibility: "private" }] }));
      const asked = await github$();
      expect(asked.body.verification_required).toBe("email");
      const verified = signedIn(await confirm(h, asked.body.state_id, await h.mailbox.otp(mail)));
      expect(verified.account_id).toBe(holder.accountId);
      expect(signedIn(await github$()).account_id).toBe(holder.accountId);
    });
  });

  describe("an unverified e-mail never links", () => {
    it("Google: email_verified false for an e-mail an account holds creates a separate account and sends no code", async () => {
      const holder = await h.signIn({ email: email("victim") });
      const mail = (await h.db.prisma.identifier.findFirstOrThrow({ where: { accountId: holder.accountId, kind: "email" } })).value;
      const sent = h.mailbox.messages.length;
      google.loginAs(googleUser({ email: mail, email_verified: false }));
      const r = signedIn(await google$());
      expect(r.account_id).not.toBe(holder.accountId);
      expect(await identifiersOf(holder.accountId)).toEqual([`own:email:${mail}`]);
      expect(h.mailbox.messages.length).toBe(sent);
    });

    it("Google: no email_verified claim at all counts as unverified", async () => {
      const holder = await h.signIn({ email: email("victim") });
      const mail = (await h.db.prisma.identifier.findFirstOrThrow({ where: { accountId: holder.accountId, kind: "email" } })).value;
      google.loginAs({ sub: `g-${tag}-${++seq}`, email: mail, name: "No Claim" });
      expect(signedIn(await google$()).account_id).not.toBe(holder.accountId);
    });

    it("GitHub: an unverified primary e-mail, or the public profile e-mail, never links", async () => {
      const holder = await h.signIn({ email: email("ghvictim") });
      const mail = (await h.db.prisma.identifier.findFirstOrThrow({ where: { accountId: holder.accountId, kind: "email" } })).value;
      github.loginAs(githubUser({ emails: [{ email: mail, primary: true, verified: false, visibility: "public" }] }));
      expect(signedIn(await github$()).account_id).not.toBe(holder.accountId);
      // /user's `email` is whatever the user typed as public e-mail; only /user/emails says verified
      github.loginAs(githubUser({ email: mail }));
      expect(signedIn(await github$()).account_id).not.toBe(holder.accountId);
      // a verified but non-primary address is not the one GitHub vouches for either
      github.loginAs(githubUser({ emails: [{ email: email("p"), primary: true, verified: true, visibility: "private" }, { email: mail, primary: false, verified: true, visibility: null }] }));
      expect(signedIn(await github$()).account_id).not.toBe(holder.accountId);
      expect(await identifiersOf(holder.accountId)).toEqual([`own:email:${mail}`]);
    });
  });

  describe("start refuses before anything is stored", () => {
    it("an unknown provider: 404 ProviderNotFound", async () => {
      const r = await start(h, "nope", app.redirectUri);
      expect(r.status).toBe(404);
      expect(r.body).toEqual({ error: "ProviderNotFound", message: expect.any(String) });
    });

    it("a redirect URI that is not a first-party client's: 400 InvalidRedirectUri", async () => {
      const thirdParty = await registerClient(h, { firstParty: false, redirectUris: ["https://third.example/cb"] });
      for (const uri of ["https://evil.example/cb", thirdParty.redirectUri, `${app.redirectUri}/deeper`, `${app.redirectUri}?x=1`]) {
        const r = await start(h, "google", uri);
        expect(r.status, uri).toBe(400);
        expect(r.body).toEqual({ error: "InvalidRedirectUri", message: expect.any(String) });
      }
    });

    // 30th review: a program that receives the redirect finishes the flow itself (the state_id
    // it started with, the code, a publishable key), confidential client or not
    it("a first-party client's redirect URI another app could receive: 400 InvalidRedirectUri, whatever the client's type", async () => {
      await registerClient(h, { type: "CONFIDENTIAL", firstParty: true, redirectUris: ["com.example.app:/cb", "http://127.0.0.1:8765/cb"] });
      const refused = await start(h, "google", "com.example.app:/cb");
      expect(refused.status).toBe(400);
      expect(refused.body).toEqual({ error: "InvalidRedirectUri", message: expect.stringMatching(/another app on the device could receive/) });
      // outside production a loopback address is the app being built; in production a stranger's
      expect((await start(h, "google", "http://127.0.0.1:8765/cb")).status).toBe(200);
      expect(receivableByOthers("http://127.0.0.1:8765/cb", true)).toBe(true);
      expect(receivableByOthers("http://127.0.0.1:8765/cb", false)).toBe(false);
      expect(receivableByOthers("https://app.example/cb", true)).toBe(false);
      expect(receivableByOthers("com.example.app:/cb", false)).toBe(true);
    });

    it("the hosted /login page is an allowed redirect URI", async () => {
      const r = await start(h, "google", `${ORIGIN}/login`);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(new URL(r.body.authorization_url).origin).toBe(google.issuer);
    });
  });

  it("the user cancelling at the upstream comes back to the app as an error, with nothing created", async () => {
    google.loginAs(googleUser());
    google.refuseNextLogin();
    const s = await start(h, "google", app.redirectUri);
    const before = await snapshot(h);
    const back = landing(await callback(h, await google.followAuthorization(s.body.authorization_url)));
    expect(back.code).toBeNull();
    expect(back.error).toBe("ExternalSignInFailed");
    expect(`${back.url.origin}${back.url.pathname}`).toBe(app.redirectUri);
    expect(await snapshot(h)).toEqual(before);
  });

  it("GraphQL mirrors start, complete and confirm", async () => {
    const startOp = `mutation($p: String!, $r: String!) { startExternalSignIn(provider: $p, redirectUri: $r) { __typename ... on ExternalStart { stateId authorizationUrl } ... on Error { message } } }`;
    const completeOp = `mutation($s: String!, $c: String!) { completeExternalSignIn(stateId: $s, code: $c) { __typename
      ... on ExternalSignInOutcome { tokens { accountId } emailVerification { stateId destination } } ... on Error { message } } }`;
    const confirmOp = `mutation($s: String!, $o: String!) { confirmExternalSignIn(stateId: $s, otp: $o) { __typename ... on SignInTokens { accountId } ... on Error { message } } }`;
    const viaGraphql = async () => {
      const s = await h.gql(startOp, { p: "google", r: app.redirectUri });
      const started = s.body.data?.startExternalSignIn;
      expect(started?.__typename, JSON.stringify(s.body)).toBe("ExternalStart");
      const back = landing(await callback(h, await google.followAuthorization(started.authorizationUrl)));
      const c = await h.gql(completeOp, { s: started.stateId, c: back.code });
      expect(c.body.data?.completeExternalSignIn?.__typename, JSON.stringify(c.body)).toBe("ExternalSignInOutcome");
      return c.body.data.completeExternalSignIn;
    };
    const user = googleUser();
    google.loginAs(user);
    const created = await viaGraphql();
    expect(created.emailVerification).toBeNull();
    expect(await identifiersOf(created.tokens.accountId)).toEqual([`own:external:${externalValue(google, user.sub)}`]);

    const holder = await h.signIn({ email: email("gqlholder") });
    const mail = (await h.db.prisma.identifier.findFirstOrThrow({ where: { accountId: holder.accountId, kind: "email" } })).value;
    google.loginAs(googleUser({ email: mail }));
    const asked = await viaGraphql();
    expect(asked.tokens).toBeNull();
    const confirmed = await h.gql(confirmOp, { s: asked.emailVerification.stateId, o: await h.mailbox.otp(mail) });
    expect(confirmed.body.data.confirmExternalSignIn).toEqual({ __typename: "SignInTokens", accountId: holder.accountId });

    const unknown = await h.gql(startOp, { p: "nope", r: app.redirectUri });
    expect(unknown.body.data.startExternalSignIn.__typename).toBe("ProviderNotFound");
  });
});
