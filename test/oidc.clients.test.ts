// OpenID Connect clients over GraphQL (docs/oidc.md): secret key only, the secret shown
// once and kept hashed, another project's client not found, and a rotated secret works at once.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as client from "openid-client";
import { sha256Hex } from "../src/crypto.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { Agent, authorizationUrl, authorize, discover, ORIGIN, registerClient } from "./support/oidc.ts";

const FIELDS = `id clientId name redirectUris type firstParty createdAt updatedAt`;

describe.each(backends)("OpenID Connect clients on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_ISSUER: ORIGIN } });
  });
  afterAll(() => h?.close());

  const create = (input: Record<string, unknown>, headers?: Record<string, string>) =>
    h.gql(
      `mutation($input: OAuthClientInput!) { createOAuthClient(input: $input) { __typename ... on OAuthClientWithSecret { client { ${FIELDS} } clientSecret } ... on Error { message } } }`,
      { input },
      headers,
    );

  it("creates public and confidential clients; the secret is shown once and stored hashed", async () => {
    const pub = (await create({ name: "SPA", redirectUris: ["http://localhost:5173/cb"], type: "PUBLIC" })).body.data.createOAuthClient;
    expect(pub.client).toMatchObject({ name: "SPA", type: "PUBLIC", firstParty: false, redirectUris: ["http://localhost:5173/cb"] });
    expect(pub.clientSecret).toBeNull();
    const conf = (await create({ name: "Server", redirectUris: ["https://app.example/cb"], type: "CONFIDENTIAL", firstParty: true })).body.data.createOAuthClient;
    expect(conf.clientSecret).toMatch(/^lgcs_/);
    const row = await h.db.prisma.oAuthClient.findUniqueOrThrow({ where: { id: conf.client.id } });
    expect(row.secretHash).toBe(sha256Hex(conf.clientSecret));
    expect(JSON.stringify(row)).not.toContain(conf.clientSecret);
    const list = await h.gql(`{ oauthClients(first: 10) { edges { node { clientId } } } }`);
    expect(list.body.data.oauthClients.edges.map((e: any) => e.node.clientId)).toEqual(expect.arrayContaining([pub.client.clientId, conf.client.clientId]));
  });

  it("refuses bad input with InvalidRequest and a publishable key with FORBIDDEN", async () => {
    for (const input of [
      { name: "", redirectUris: ["https://a.example/cb"], type: "PUBLIC" },
      { name: "x", redirectUris: [], type: "PUBLIC" },
      { name: "x", redirectUris: ["http://a.example/cb"], type: "PUBLIC" },
      { name: "x", redirectUris: ["https://a.example/cb#frag"], type: "PUBLIC" },
      { name: "x", redirectUris: ["/relative"], type: "PUBLIC" },
    ]) {
      expect((await create(input)).body.data.createOAuthClient.__typename, JSON.stringify(input)).toBe("InvalidRequest");
    }
    const res = await create({ name: "x", redirectUris: ["https://a.example/cb"], type: "PUBLIC" }, { "x-api-key": h.publishableKey });
    expect(res.body.errors[0].extensions.code).toBe("FORBIDDEN");
  });

  // A private-use scheme makes the client a native app, and oidc-provider refuses a native app's
  // https redirect URI on a loopback host: registered anyway, every authorization of the client
  // was a 400 page (invalid_client_metadata) and every token request invalid_client_metadata.
  it("refuses an https loopback redirect URI beside an app's private-use scheme; either alone signs in", async () => {
    for (const loopback of ["https://localhost/cb", "https://127.0.0.1:8443/cb", "https://[::1]/cb"]) {
      for (const type of ["PUBLIC", "CONFIDENTIAL"]) {
        const res = await create({ name: "Native", redirectUris: ["com.example.app:/cb", loopback], type });
        expect(res.body.data.createOAuthClient, `${type} ${loopback}`).toMatchObject({ __typename: "InvalidRequest", message: expect.stringContaining(loopback) });
      }
    }
    const web = await registerClient(h, { type: "PUBLIC", firstParty: false, redirectUris: ["https://localhost/cb"] });
    const upd = await h.gql(`mutation($id: ID!) { updateOAuthClient(id: $id, input: { redirectUris: ["https://localhost/cb", "com.example.app:/cb"] }) { __typename } }`, { id: web.id });
    expect(upd.body.data.updateOAuthClient.__typename).toBe("InvalidRequest");
    const native = await registerClient(h, { type: "PUBLIC", firstParty: false, redirectUris: ["com.example.app:/cb", "http://127.0.0.1/cb"] });
    for (const c of [web, native]) {
      const auth = await authorizationUrl(await discover(h, c), c);
      const res = await new Agent(h).fetch(`${auth.url.pathname}${auth.url.search}`);
      expect(res.headers.get("location"), c.redirectUri).toMatch(/^\/oauth\/interaction\//);
    }
  });

  it("updates, rotates (the old secret stops at once) and deletes", async () => {
    const c = await registerClient(h, { type: "CONFIDENTIAL" });
    const upd = await h.gql(`mutation($id: ID!) { updateOAuthClient(id: $id, input: { name: "Renamed", redirectUris: ["https://app.example/callback", "https://app.example/two"] }) { ... on UpdateOAuthClientPayload { client { name redirectUris } } } }`, { id: c.id });
    expect(upd.body.data.updateOAuthClient.client).toEqual({ name: "Renamed", redirectUris: ["https://app.example/callback", "https://app.example/two"] });
    const rot = await h.gql(`mutation($id: ID!) { rotateOAuthClientSecret(id: $id) { ... on OAuthClientWithSecret { clientSecret } } }`, { id: c.id });
    const newSecret = rot.body.data.rotateOAuthClientSecret.clientSecret as string;
    expect(newSecret).not.toBe(c.clientSecret);
    // the old secret is invalid_client, the new one redeems a code
    const old = await discover(h, c);
    const auth = await authorizationUrl(old, c);
    const cb = await authorize(h, new Agent(h), auth, "rotate@example.com");
    const refused = await client.authorizationCodeGrant(old, cb, { pkceCodeVerifier: auth.verifier, expectedState: auth.state }).catch((e) => e.error);
    expect(refused).toBe("invalid_client");
    const fresh = await discover(h, { ...c, clientSecret: newSecret });
    expect((await client.authorizationCodeGrant(fresh, cb, { pkceCodeVerifier: auth.verifier, expectedState: auth.state, expectedNonce: auth.nonce })).access_token).toBeTruthy();
    const del = await h.gql(`mutation($id: ID!) { deleteOAuthClient(id: $id) { ... on DeleteOAuthClientPayload { deletedId } } }`, { id: c.id });
    expect(del.body.data.deleteOAuthClient.deletedId).toBe(c.id);
    const again = await h.gql(`mutation($id: ID!) { rotateOAuthClientSecret(id: $id) { __typename } }`, { id: c.id });
    expect(again.body.data.rotateOAuthClientSecret.__typename).toBe("NotFound");
  });
});
