// A provider mix-up (tenth review; RFC 9700 §4.4): another tenant of the gateway adds a provider
// whose endpoints it controls (a "GitHub Enterprise Server" on its own host), starts a flow there,
// and gets a victim's browser to run the victim project's GitHub authorization with the
// attacker's `state`. GitHub, already authorized, sends the browser straight back with a code.
// With one callback for every provider, linkgate found the flow by state alone and sent GitHub's
// code to the attacker's token endpoint; the attacker then finished a flow of the victim's project
// with it (PKCE holds no secret the attacker lacks: they copied that flow's own challenge) and got
// the victim's tokens. Each provider now comes back to a callback of its own, and a callback only
// finishes a flow of the provider its path names (docs/external-identities.md, "One callback per
// provider"). Providers made before that keep the shared callback until an admin moves them.
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";
import { ORIGIN, registerClient, type RegisteredClient } from "./support/oidc.ts";
import { startUpstreamGithub, type UpstreamGithub } from "./support/upstream.ts";
import { warnSharedCallbacks } from "../src/auth/external/providers.ts";
import type { Logger } from "../src/log.ts";
import { addProvider, callback, complete, externalSignIn, freshAddress, landing } from "./support/upstream-linkgate.ts";

/** The attacker's "GitHub Enterprise Server": it keeps every code sent to its token endpoint. */
async function startRogueGithub(): Promise<{ origin: string; codes: string[]; stop(): Promise<void> }> {
  const codes: string[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      const code = new URLSearchParams(body).get("code");
      if (code) codes.push(code);
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ error: "bad_verification_code" }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    origin: `http://127.0.0.1:${port}`,
    codes,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const PROVIDER = `__typename ... on IdentityProvider { id callbackUrl sharedCallback } ... on Error { message }`;

describe.each(backends)("a provider cannot be sent another provider's code (mix-up) on %s", (backend) => {
  let h: Harness;
  let github: UpstreamGithub;
  let rogue: Awaited<ReturnType<typeof startRogueGithub>>;
  let app: RegisteredClient;
  let githubId: string;
  let attackerKey: string;
  let rogueId: string;
  const victim = { id: 4242, login: "victim", name: "Victim", email: null, emails: [{ email: "victim@example.com", primary: true, verified: true, visibility: null }] };

  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_ISSUER: ORIGIN } });
    [github, rogue] = await Promise.all([startUpstreamGithub(), startRogueGithub()]);
    app = await registerClient(h, { firstParty: true, redirectUris: ["https://app-v.example/cb"] });
    githubId = (await addProvider(h, github, "github")).id;
    // the victim has signed in with GitHub before: GitHub now sends them straight back
    github.loginAs(victim);
    expect((await externalSignIn(h, github, "github", app.redirectUri)).status).toBe(200);

    // another tenant: its own project, and a GitHub provider whose host is the attacker's
    const created = await h.gql(`mutation { createProject(name: "attacker") { ... on CreateProjectPayload { apiKey } } }`, {}, { "x-admin-token": h.adminToken });
    attackerKey = created.body.data.createProject.apiKey;
    const rogueProvider = await h.gql(
      `mutation($input: IdentityProviderInput!) { createIdentityProvider(input: $input) { ${PROVIDER} } }`,
      { input: { preset: "GITHUB", slug: "github", issuer: rogue.origin, clientId: "rogue", clientSecret: "rogue" } },
      { "x-api-key": attackerKey },
    );
    rogueId = rogueProvider.body.data.createIdentityProvider.id;
    expect(rogueId).toBeTruthy();
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([github?.stop(), rogue?.stop()]);
  });

  const startAt = (key: string, redirectUri: string) =>
    h.call("POST", "/auth/external/start", { body: { provider: "github", redirect_uri: redirectUri }, headers: { "x-api-key": key }, from: freshAddress() });

  /**
   * The attack: the victim project's authorization URL with the attacker's state (and, when
   * given, another redirect_uri), run by the victim's browser, which lands back at linkgate.
   */
  async function mixUp(opts: { redirectUri?: string } = {}) {
    const victimFlow = await startAt(h.publishableKey, app.redirectUri);
    const attackerFlow = await startAt(attackerKey, `${ORIGIN}/login`);
    expect(victimFlow.status).toBe(200);
    expect(attackerFlow.status).toBe(200);
    const crafted = new URL(victimFlow.body.authorization_url);
    crafted.searchParams.set("state", new URL(attackerFlow.body.authorization_url).searchParams.get("state")!);
    if (opts.redirectUri) crafted.searchParams.set("redirect_uri", opts.redirectUri);
    const back = await github.followAuthorization(crafted);
    const res = await callback(h, back);
    // had a code been sent to the attacker's host, this is what they would do with it
    for (const stolen of rogue.codes) {
      const withVictimState = new URL(back);
      withVictimState.search = new URLSearchParams({ code: stolen, state: new URL(victimFlow.body.authorization_url).searchParams.get("state")! }).toString();
      const injected = await callback(h, withVictimState);
      const code = injected.status === 303 ? landing(injected).code : null;
      if (code) expect((await complete(h, victimFlow.body.state_id, code)).body).toEqual({});
    }
    return { res, back };
  }

  it("each provider has a callback of its own, and new ones never the shared one", async () => {
    const list = await h.gql(`{ identityProviders { id callbackUrl sharedCallback } }`);
    expect(list.body.data.identityProviders).toEqual([{ id: githubId, callbackUrl: `${ORIGIN}/auth/external/${githubId}/callback`, sharedCallback: false }]);
    const refused = await h.gql(`mutation($id: ID!) { updateIdentityProvider(id: $id, input: { sharedCallback: true }) { ${PROVIDER} } }`, { id: githubId });
    expect(refused.body.data.updateIdentityProvider).toEqual({ __typename: "InvalidRequest", message: expect.stringMatching(/only be set to false/) });
  });

  it("GitHub's code brought back with the attacker's state is not sent to the attacker's provider", async () => {
    const { res, back } = await mixUp();
    expect(back.pathname).toBe(`/auth/external/${githubId}/callback`);
    expect(rogue.codes).toEqual([]);
    expect(res.status).toBe(400);
  });

  it("the attacker's own callback as redirect_uri: GitHub does not send the code there", async () => {
    const { res, back } = await mixUp({ redirectUri: `${ORIGIN}/auth/external/${rogueId}/callback` });
    expect(back.searchParams.get("code")).toBeNull();
    expect(rogue.codes).toEqual([]);
    expect(res.status).not.toBe(500);
  });

  // eleventh review: a tenant's old provider, left on the shared callback, repointed at a host the
  // tenant controls would be sent the codes of every provider still there
  it("a provider on the shared callback cannot be pointed at another issuer, preset or client id until it moves", async () => {
    const rogueGithub = await startUpstreamGithub();
    try {
      const theirs = await h.gql(
        `mutation($input: IdentityProviderInput!) { createIdentityProvider(input: $input) { ${PROVIDER} } }`,
        { input: { preset: "GITHUB", slug: "old", issuer: github.baseUrl, clientId: "theirs", clientSecret: "s" } },
        { "x-api-key": attackerKey },
      );
      const id = theirs.body.data.createIdentityProvider.id;
      await h.db.prisma.identityProvider.update({ where: { id }, data: { sharedCallback: true } }); // as the migration leaves it
      const update = (input: Record<string, unknown>) =>
        h.gql(`mutation($id: ID!, $input: IdentityProviderInput!) { updateIdentityProvider(id: $id, input: $input) { ${PROVIDER} } }`, { id, input }, { "x-api-key": attackerKey });
      for (const input of [{ issuer: rogue.origin }, { preset: "OIDC", issuer: rogueGithub.origin, scopes: ["openid"] }, { clientId: "other" }]) {
        expect((await update(input)).body.data.updateIdentityProvider).toEqual({ __typename: "InvalidRequest", message: expect.stringMatching(/keeps its preset, issuer and client id/) });
      }
      const stored = await h.db.prisma.identityProvider.findUniqueOrThrow({ where: { id } });
      expect(stored).toMatchObject({ issuer: github.baseUrl, clientId: "theirs", preset: "github", sharedCallback: true });
      // the rest of its settings can change, and moving it lifts the rule, in the same update too
      expect((await update({ displayName: "Old GitHub", clientSecret: "new" })).body.data.updateIdentityProvider.sharedCallback).toBe(true);
      expect((await update({ issuer: rogue.origin, sharedCallback: false })).body.data.updateIdentityProvider).toMatchObject({ sharedCallback: false, callbackUrl: `${ORIGIN}/auth/external/${id}/callback` });
    } finally {
      await rogueGithub.stop();
    }
  });

  it("a provider made before per-provider callbacks keeps the shared one, which finishes only such providers' flows, until it is moved", async () => {
    // as the migration leaves a provider that existed: its registration at GitHub names the shared callback
    await h.db.prisma.identityProvider.update({ where: { id: githubId }, data: { sharedCallback: true } });
    github.addRedirectUri(`${ORIGIN}/auth/external/callback`);
    // every start says so while one is left
    const warned: string[] = [];
    const logger = { warn: (_: unknown, message: string) => void warned.push(message) } as unknown as Logger;
    await warnSharedCallbacks({ prisma: h.db.prisma, logger });
    expect(warned).toEqual([expect.stringMatching(/^1 identity provider\(s\) still use the shared callback/)]);
    const signIn = await externalSignIn(h, github, "github", app.redirectUri);
    expect(signIn.status, JSON.stringify(signIn.body)).toBe(200);

    // the attacker's new provider is not found at the shared callback, and GitHub will not send
    // a code registered under the shared path to the attacker's own path (not a subdirectory of it)
    const shared = await mixUp();
    expect(shared.back.pathname).toBe("/auth/external/callback");
    expect(shared.res.status).toBe(400);
    const theirs = await mixUp({ redirectUri: `${ORIGIN}/auth/external/${rogueId}/callback` });
    expect(theirs.back.searchParams.get("code")).toBeNull();
    expect(rogue.codes).toEqual([]);

    // a flow of a provider on the shared callback is not finished at an own path either
    const flow = await startAt(h.publishableKey, app.redirectUri);
    const back = await github.followAuthorization(flow.body.authorization_url);
    const elsewhere = new URL(back);
    elsewhere.pathname = `/auth/external/${githubId}/callback`;
    expect((await callback(h, elsewhere)).status).toBe(400);

    const moved = await h.gql(`mutation($id: ID!) { updateIdentityProvider(id: $id, input: { sharedCallback: false }) { ${PROVIDER} } }`, { id: githubId });
    expect(moved.body.data.updateIdentityProvider).toEqual({ __typename: "IdentityProvider", id: githubId, callbackUrl: `${ORIGIN}/auth/external/${githubId}/callback`, sharedCallback: false });
    expect((await externalSignIn(h, github, "github", app.redirectUri)).status).toBe(200);
    await warnSharedCallbacks({ prisma: h.db.prisma, logger });
    expect(warned).toHaveLength(1);
  });
});
