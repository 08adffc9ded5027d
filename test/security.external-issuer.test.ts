// An issuer that is a discovery document's URL (…/.well-known/openid-configuration). openid-client
// fetches such a URL as it is and then takes whatever issuer the document names, unchecked: a
// provider added that way (the address a partner's IdP gives out, pasted as its issuer) could name
// another provider's issuer, say Google's, and sign ID tokens for it with keys of its own. Its
// users became <google issuer>#<sub>: whoever runs it signed into the accounts of the project's
// Google users. An external identity is (issuer, subject), and a provider speaks only for its own
// issuer (docs/external-identities.md, "Providers").
import http from "node:http";
import { exportJWK, generateKeyPair, SignJWT, type JWK } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { ORIGIN } from "./support/oidc.ts";
import { authorize, callback, complete, externalValue, externalWorldFor, freshAddress, landing, start } from "./support/upstream-linkgate.ts";

const REDIRECT = "https://app-issuer.example/cb";
const DISCOVERY_PATH = "/.well-known/openid-configuration";
const CREATE = `mutation($input: IdentityProviderInput!) { createIdentityProvider(input: $input) {
  __typename ... on IdentityProvider { id slug } ... on Error { message } } }`;

/**
 * The partner's IdP: its discovery document names `claimedIssuer` (not its own address), and its
 * token endpoint answers an ID token for `claimedIssuer` and the subject the test chose, signed
 * with a key its own key set lists.
 */
async function startRogueIdp() {
  const { privateKey, publicKey } = await generateKeyPair("RS256");
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid: "rogue", alg: "RS256", use: "sig" };
  const as = { claimedIssuer: "", subject: "", nonce: "", clientId: "rogue-client" };
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", async () => {
      const json = (status: number, value: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));
      if (req.url === DISCOVERY_PATH) {
        return json(200, {
          issuer: as.claimedIssuer,
          authorization_endpoint: `${origin}/authorize`,
          token_endpoint: `${origin}/token`,
          jwks_uri: `${origin}/jwks`,
          response_types_supported: ["code"],
          subject_types_supported: ["public"],
          id_token_signing_alg_values_supported: ["RS256"],
        });
      }
      if (req.url === "/jwks") return json(200, { keys: [jwk] });
      if (req.url === "/token") {
        const now = Math.floor(Date.now() / 1000);
        const idToken = await new SignJWT({ iss: as.claimedIssuer, aud: as.clientId, sub: as.subject, nonce: as.nonce, iat: now, exp: now + 600 })
          .setProtectedHeader({ alg: "RS256", kid: "rogue" })
          .sign(privateKey);
        return json(200, { access_token: "at", token_type: "Bearer", expires_in: 600, id_token: idToken });
      }
      json(404, {});
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return { origin, as, stop: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe.each(backends)("a provider speaks only for its own issuer on %s", (backend) => {
  const { h, google } = externalWorldFor(backend, REDIRECT);
  let rogue: Awaited<ReturnType<typeof startRogueIdp>>;
  beforeAll(async () => {
    rogue = await startRogueIdp();
  });
  afterAll(async () => {
    await rogue?.stop();
  });

  it("an issuer that is a discovery document's URL is refused: its document could name another provider's issuer", async () => {
    rogue.as.claimedIssuer = google.issuer;
    const res = await h.gql(CREATE, {
      input: { preset: "OIDC", slug: "partner", issuer: `${rogue.origin}${DISCOVERY_PATH}`, clientId: rogue.as.clientId, clientSecret: "s" },
    });
    expect(res.body.data.createIdentityProvider.__typename).toBe("InvalidRequest");
    expect(res.body.data.createIdentityProvider.message).toMatch(/issuer/);
    expect(await h.db.prisma.identityProvider.count({ where: { slug: "partner" } })).toBe(0);
  });

  it("one stored that way before cannot sign anyone in as a user of another issuer", async () => {
    // the victim signed in with Google: an account identified by <google issuer>#<sub>
    const sub = `victim-${Date.now()}`;
    google.loginAs({ sub, email: `v${Date.now()}@example.com`, email_verified: true });
    const signed = await authorize(h, google, "google", REDIRECT);
    const victim = (await complete(h, signed.started.state_id, signed.code)).body;
    expect(victim.account_id).toBeTruthy();

    // a provider stored with such an issuer before it was refused
    const id = `idp_rogue${Date.now()}`;
    await h.db.prisma.identityProvider.create({
      data: { id, projectId: h.projectId, preset: "oidc", slug: "partner-old", displayName: "Partner", issuer: `${rogue.origin}${DISCOVERY_PATH}`, clientId: rogue.as.clientId, scopes: "openid email profile" },
    });
    rogue.as.claimedIssuer = google.issuer;
    rogue.as.subject = sub;
    const from = freshAddress();
    const started = await start(h, "partner-old", REDIRECT, { from });
    if (started.status === 200) {
      const url = new URL(started.body.authorization_url);
      rogue.as.nonce = url.searchParams.get("nonce")!;
      const back = new URL(`${ORIGIN}/auth/external/${id}/callback`);
      back.search = new URLSearchParams({ code: "c", state: url.searchParams.get("state")! }).toString();
      const res = await callback(h, back, { from });
      const landed = res.status === 303 ? landing(res) : null;
      if (landed?.code) {
        const done = await complete(h, started.body.state_id, landed.code, { from });
        expect(done.body.account_id).not.toBe(victim.account_id);
      }
    } else {
      // refused at its discovery: a clear 400, not a 500
      expect(started.status).toBe(400);
      expect(JSON.stringify(started.body)).toContain("ExternalSignInFailed");
    }
    const victimIdentity = await h.db.prisma.identifier.findFirstOrThrow({ where: { kind: "external", value: externalValue(google, sub) } });
    expect(await h.db.prisma.session.count({ where: { accountId: victimIdentity.accountId } })).toBe(1);
  });
});
