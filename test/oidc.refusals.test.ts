// The OpenID Connect provider through openid-client, in-process (app.fetch): a sign-in by code on
// the interaction endpoints the /login page uses, the tokens it gives, and every refusal of
// docs/oidc.md with its RFC error code and nothing issued.
import { describe, expect, it } from "vitest";
import * as client from "openid-client";
import { backends } from "./support/db.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { Agent, authorizationUrl, authorize, callback, discover, oidcHarnessWithApp, ORIGIN, registerClient, signInByCode, startInteraction } from "./support/oidc.ts";

const VIEWER = "{ viewer { id } }";

describe.each(backends)("OpenID Connect refusals on %s", (backend) => {
  const { h, app, config, email } = oidcHarnessWithApp(backend);

  /** A whole sign-in; the tokens and the callback URL. */
  async function signIn(who = email(), c = app, cfg = config()) {
    const auth = await authorizationUrl(cfg, c);
    const cb = await authorize(h, new Agent(h), auth, who);
    const tokens = await client.authorizationCodeGrant(cfg, cb, { pkceCodeVerifier: auth.verifier, expectedState: auth.state, expectedNonce: auth.nonce });
    return { tokens, cb, auth, email: who };
  }
  const viewer = (accessToken: string) => h.gql(VIEWER, {}, { authorization: `Bearer ${accessToken}` });
  const grantError = (p: Promise<unknown>) => p.then(
    () => ({ error: "none" }),
    (e: { error?: string; code?: string }) => ({ error: e.error ?? e.code }),
  );
  const codeOf = (cb: URL) => cb.searchParams.get("code");
  const eventsOf = (type: string) => h.db.prisma.outboxEvent.findMany({ where: { eventType: type }, orderBy: { seq: "asc" } });

  it("discovery lists the code flow, and a sign-in gives RFC 9068 access tokens the API accepts", async () => {
    const meta = config().serverMetadata();
    expect(meta).toMatchObject({
      authorization_endpoint: `${ORIGIN}/oauth/authorize`,
      token_endpoint: `${ORIGIN}/oauth/token`,
      revocation_endpoint: `${ORIGIN}/oauth/revoke`,
      end_session_endpoint: `${ORIGIN}/oauth/logout`,
      response_types_supported: ["code"],
      grant_types_supported: ["authorization_code", "refresh_token"],
      code_challenge_methods_supported: ["S256"],
      token_endpoint_auth_methods_supported: ["none", "client_secret_basic", "client_secret_post"],
    });
    expect(meta.scopes_supported).toEqual(expect.arrayContaining(["openid", "email", "phone", "profile", "offline_access"]));
    const before = (await eventsOf("user.authentication.success")).length;
    const { tokens } = await signIn();
    const [header, payload] = tokens.access_token.split(".").slice(0, 2).map((p) => JSON.parse(Buffer.from(p, "base64url").toString()));
    expect(header.typ).toBe("at+jwt");
    expect(payload).toMatchObject({ aud: h.projectId, client_id: app.clientId, scope: expect.stringContaining("openid"), iss: ORIGIN });
    expect(payload).toHaveProperty("jti");
    expect(payload.sid).toMatch(/^ses_/);
    const claims = tokens.claims()!;
    expect(claims).toMatchObject({ aud: app.clientId, amr: ["otp"], sub: payload.sub });
    expect(claims).toHaveProperty("at_hash");
    expect(claims).toHaveProperty("auth_time");
    expect((await viewer(tokens.access_token)).body.data.viewer.id).toBe(payload.sub);
    expect((await eventsOf("user.authentication.success")).length).toBe(before + 1);
  });

  it("a missing or plain PKCE challenge is refused with invalid_request, at the client, and no code", async () => {
    for (const extra of [{ code_challenge: "", code_challenge_method: "" }, { code_challenge: "a".repeat(43), code_challenge_method: "plain" }]) {
      const auth = await authorizationUrl(config(), app);
      for (const [k, v] of Object.entries(extra)) v ? auth.url.searchParams.set(k, v) : auth.url.searchParams.delete(k);
      const res = await new Agent(h).follow(auth.url.toString());
      const to = new URL(res.headers.get("location")!);
      expect(to.origin + to.pathname).toBe(app.redirectUri);
      expect(to.searchParams.get("error")).toBe("invalid_request");
      expect(to.searchParams.get("state")).toBe(auth.state);
      expect(to.searchParams.has("code")).toBe(false);
    }
  });

  // 32nd review: oidc-provider answered the refusal in the mode asked for, and form_post's page
  // posted itself to the app by inline script, from a page with no script policy: anyone's link
  // made a visitor's browser post a form with a state of the link's choosing to the app
  it("a response mode other than the query that discovery lists is refused on a page of its own, with no code, no form and no script", async () => {
    for (const mode of ["fragment", "form_post", "form_post.jwt", "web_message"]) {
      for (const method of ["GET", "POST"] as const) {
        const auth = await authorizationUrl(config(), app);
        auth.url.searchParams.set("response_mode", mode);
        const res =
          method === "GET"
            ? await new Agent(h).fetch(`${auth.url.pathname}${auth.url.search}`)
            : await h.app.fetch(
                new Request(new URL(auth.url.pathname, ORIGIN), { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: auth.url.searchParams.toString() }),
              );
        const body = await res.text();
        expect([res.status, res.headers.get("location")], `${method} ${mode}`).toEqual([400, null]);
        expect(body, `${method} ${mode}`).toContain("response_mode must be query");
        expect(body, `${method} ${mode}`).not.toMatch(/<script|<form|name="code"/);
        expect(res.headers.get("content-security-policy"), `${method} ${mode}`).toMatch(/default-src 'none'/);
      }
    }
    const auth = await authorizationUrl(config(), app);
    auth.url.searchParams.set("response_mode", "query");
    expect((await new Agent(h).follow(auth.url.toString())).headers.get("location")).toMatch(/^\/login\?interaction=/);
  });

  it("a wrong verifier is invalid_grant and issues nothing", async () => {
    const auth = await authorizationUrl(config(), app);
    const cb = await authorize(h, new Agent(h), auth, email());
    const wrong = client.randomPKCECodeVerifier();
    expect(await grantError(client.authorizationCodeGrant(config(), cb, { pkceCodeVerifier: wrong, expectedState: auth.state }))).toEqual({ error: "invalid_grant" });
  });

  it("a code used twice is invalid_grant, and the tokens of its first use stop working", async () => {
    const { tokens, cb, auth } = await signIn();
    expect((await viewer(tokens.access_token)).status).toBe(200);
    const before = (await eventsOf("security.suspicious_activity")).length;
    expect(await grantError(client.authorizationCodeGrant(config(), cb, { pkceCodeVerifier: auth.verifier, expectedState: auth.state }))).toEqual({ error: "invalid_grant" });
    expect((await viewer(tokens.access_token)).body.errors[0].extensions.code).toBe("UNAUTHENTICATED");
    expect(await grantError(client.refreshTokenGrant(config(), tokens.refresh_token!))).toEqual({ error: "invalid_grant" });
    const events = await eventsOf("security.suspicious_activity");
    expect(events.length).toBe(before + 1);
    expect(JSON.parse(events.at(-1)!.body).data).toMatchObject({ reason: "authorization_code_reused", client_id: app.clientId });
  });

  it("a refresh token rotates on every use; a used one is invalid_grant and revokes its whole family", async () => {
    const { tokens } = await signIn();
    const first = await client.refreshTokenGrant(config(), tokens.refresh_token!);
    expect(first.refresh_token).not.toBe(tokens.refresh_token);
    const second = await client.refreshTokenGrant(config(), first.refresh_token!);
    expect((await viewer(second.access_token)).status).toBe(200);
    const before = (await eventsOf("security.suspicious_activity")).length;
    expect(await grantError(client.refreshTokenGrant(config(), first.refresh_token!))).toEqual({ error: "invalid_grant" });
    expect(await grantError(client.refreshTokenGrant(config(), second.refresh_token!))).toEqual({ error: "invalid_grant" });
    expect((await viewer(second.access_token)).body.errors[0].extensions.code).toBe("UNAUTHENTICATED");
    const events = await eventsOf("security.suspicious_activity");
    expect(events.length).toBe(before + 1);
    expect(JSON.parse(events.at(-1)!.body).data).toMatchObject({ reason: "refresh_token_reused" });
    // only hashes are stored: no row holds the token or its id
    const rows = await h.db.prisma.oidcPayload.findMany();
    expect(JSON.stringify(rows)).not.toContain(second.refresh_token!);
  });

  it("an expired code is invalid_grant", async () => {
    const auth = await authorizationUrl(config(), app);
    const cb = await authorize(h, new Agent(h), auth, email());
    await h.db.prisma.oidcPayload.updateMany({ where: { kind: "AuthorizationCode", consumedAt: null }, data: { expiresAt: new Date(Date.now() - 1000) } });
    expect(await grantError(client.authorizationCodeGrant(config(), cb, { pkceCodeVerifier: auth.verifier, expectedState: auth.state }))).toEqual({ error: "invalid_grant" });
  });

  it("an unknown client or an unregistered or subtly different redirect URI gets a 400 page and no redirect", async () => {
    const variants = [
      `${app.redirectUri}/`,
      app.redirectUri.replace("https://app.example", "https://app.example:8443"),
      app.redirectUri.replace("https:", "http:"),
      "https://evil.example/callback",
    ];
    for (const redirectUri of variants) {
      const auth = await authorizationUrl(config(), app, { redirect_uri: redirectUri });
      const res = await new Agent(h).fetch(auth.url.toString());
      expect(res.status, redirectUri).toBe(400);
      expect(res.headers.get("location")).toBeNull();
      expect(await res.text()).toContain("redirect_uri");
    }
    const auth = await authorizationUrl(config(), app, { client_id: "lgc_unknown" });
    const res = await new Agent(h).fetch(auth.url.toString());
    expect(res.status).toBe(400);
    expect(res.headers.get("location")).toBeNull();
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("x-request-id")).toBeTruthy();
  });

  it("a client of another project cannot redeem this project's codes, and its tokens are refused with this project's key", async () => {
    const created = await h.gql(`mutation { createProject(name: "other") { ... on CreateProjectPayload { secretKey } } }`, {}, { "x-admin-token": h.adminToken });
    const otherKey = created.body.data.createProject.secretKey as string;
    const other = await registerClient(h, { apiKey: otherKey });
    const otherConfig = await discover(h, other);
    // this project's code, presented by the other project's client
    const auth = await authorizationUrl(config(), app);
    const cb = await authorize(h, new Agent(h), auth, email());
    const stolen = new URL(other.redirectUri);
    stolen.search = cb.search;
    expect(await grantError(client.authorizationCodeGrant(otherConfig, stolen, { pkceCodeVerifier: auth.verifier, expectedState: auth.state }))).toEqual({ error: "invalid_grant" });
    // the other project's token, with this project's key
    const { tokens } = await signIn(email(), other, otherConfig);
    expect((await viewer(tokens.access_token)).body.errors[0].extensions.code).toBe("FORBIDDEN");
    // and the other project's client is not found here
    const update = await h.gql(`mutation($id: ID!) { deleteOAuthClient(id: $id) { __typename } }`, { id: other.id });
    expect(update.body.data.deleteOAuthClient.__typename).toBe("NotFound");
  });

  it("a third-party client asks for consent once; a no sends access_denied to the client", async () => {
    const third = await registerClient(h, { firstParty: false, name: "Partner <app>" });
    const cfg = await discover(h, third);
    const who = email();
    const agent = new Agent(h);
    let auth = await authorizationUrl(cfg, third);
    let uid = await startInteraction(agent, auth.url);
    const asked = await signInByCode(h, agent, uid, who);
    expect(asked.body).toEqual({ consent: { client: { name: "Partner <app>", firstParty: false }, scopes: ["openid", "email", "profile", "offline_access"] } });
    const yes = await agent.json(`/oauth/interaction/${uid}/consent`, { allow: true });
    const cb = await callback(agent, yes.body.redirectTo);
    expect(codeOf(cb)).toBeTruthy();
    // remembered: the next sign-in goes straight back
    auth = await authorizationUrl(cfg, third);
    const again = await authorize(h, new Agent(h), auth, who);
    expect(codeOf(again)).toBeTruthy();
    const tokens = await client.authorizationCodeGrant(cfg, again, { pkceCodeVerifier: auth.verifier, expectedState: auth.state, expectedNonce: auth.nonce });
    // the user withdraws it (signed in with linkgate itself: the app's own token may not): the
    // app's refresh token ends, and the consent page asks again
    const own = await h.signIn({ email: who });
    const revoke = await h.gql(`mutation($c: String!) { revokeOAuthConsent(clientId: $c) { __typename ... on RevokeOAuthConsentPayload { clientId } } }`, { c: third.clientId }, {
      authorization: `Bearer ${own.token}`,
    });
    expect(revoke.body.data.revokeOAuthConsent).toEqual({ __typename: "RevokeOAuthConsentPayload", clientId: third.clientId });
    expect(await grantError(client.refreshTokenGrant(cfg, tokens.refresh_token!))).toEqual({ error: "invalid_grant" });
    const agent3 = new Agent(h);
    uid = await startInteraction(agent3, (await authorizationUrl(cfg, third)).url);
    expect((await signInByCode(h, agent3, uid, who)).body).toHaveProperty("consent");
    // another user says no
    const agent2 = new Agent(h);
    auth = await authorizationUrl(cfg, third);
    uid = await startInteraction(agent2, auth.url);
    await signInByCode(h, agent2, uid, email());
    const no = await agent2.json(`/oauth/interaction/${uid}/consent`, { allow: false });
    const denied = await callback(agent2, no.body.redirectTo);
    expect(denied.searchParams.get("error")).toBe("access_denied");
    expect(codeOf(denied)).toBeNull();
  });

  it("the OTP abuse limits apply on the sign-in page inside the flow: too many codes for one address is 429 RateLimited", async () => {
    const agent = new Agent(h);
    const uid = await startInteraction(agent, (await authorizationUrl(config(), app)).url);
    const who = email("limited");
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await agent.json(`/oauth/interaction/${uid}/otp/start`, { email: who })).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    expect((await agent.json(`/oauth/interaction/${uid}/otp/start`, { email: who })).body.error).toBe("RateLimited");
  });

  it("the sign-in endpoints of an interaction refuse a browser without its cookie (400 InvalidRequest), and the page for it is /login", async () => {
    const agent = new Agent(h);
    const uid = await startInteraction(agent, (await authorizationUrl(config(), app)).url);
    const stranger = await new Agent(h).json(`/oauth/interaction/${uid}/otp/start`, { email: email() });
    expect(stranger).toMatchObject({ status: 400, body: { error: "InvalidRequest" } });
    const page = await agent.fetch(`/oauth/interaction/${uid}`);
    expect(page.headers.get("location")).toBe(`/login?interaction=${uid}`);
    expect((await agent.fetch(`/oauth/interaction/${uid}/details`)).status).toBe(200);
  });

  it("signs in with a passkey inside the flow: amr passkey, the same account", async () => {
    const who = email("passkey");
    const first = await signIn(who);
    const headers = { authorization: `Bearer ${first.tokens.access_token}` };
    const auth = new SoftAuthenticator(ORIGIN);
    const opts = await h.call("POST", "/auth/passkey/registration/options", { headers });
    expect((await h.call("POST", "/auth/passkey/registration/verify", { body: { response: auth.create(opts.body), name: "Laptop" }, headers })).status).toBe(200);
    const agent = new Agent(h);
    const authz = await authorizationUrl(config(), app);
    const uid = await startInteraction(agent, authz.url);
    const options = await agent.json(`/oauth/interaction/${uid}/passkey/options`, {});
    const signed = await agent.json(`/oauth/interaction/${uid}/passkey/verify`, { response: auth.get(options.body) });
    expect(signed.status, JSON.stringify(signed.body)).toBe(200);
    const cb = await callback(agent, signed.body.redirectTo);
    const tokens = await client.authorizationCodeGrant(config(), cb, { pkceCodeVerifier: authz.verifier, expectedState: authz.state, expectedNonce: authz.nonce });
    expect(tokens.claims()).toMatchObject({ sub: first.tokens.claims()!.sub, amr: ["passkey"] });
  });

  it("a merge in the middle: the secondary's refresh token stops, and its e-mail now signs into the primary", async () => {
    const primary = await signIn();
    const secondary = await signIn();
    const bearer = { authorization: `Bearer ${primary.tokens.access_token}` };
    const request = await h.call("POST", "/users/link/request", { body: { email: secondary.email }, headers: bearer });
    expect(request.status, JSON.stringify(request.body)).toBe(200);
    const otp = await h.mailbox.otp(secondary.email);
    const verify = await h.call("POST", "/users/link/verify", { body: { state_id: request.body.state_id, otp }, headers: bearer });
    expect(verify.body.outcome).toBe("merged");
    expect(await grantError(client.refreshTokenGrant(config(), secondary.tokens.refresh_token!))).toEqual({ error: "invalid_grant" });
    const again = await signIn(secondary.email);
    expect(again.tokens.claims()!.sub).toBe(primary.tokens.claims()!.sub);
  });
});
