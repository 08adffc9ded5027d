// Every sign-in page lists all of a project's identity providers (REST /auth/external/providers,
// the hosted /login, an app's authorization), unpaged, and the discovery cache is shared by every
// project: a secret key could add providers without end. A project holds at most 20 unless
// LINKGATE_IDENTITY_PROVIDERS_PER_PROJECT says otherwise (docs/external-identities.md,
// "Providers"). Providers are added over GraphQL only (there is no REST route that adds one).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

const CREATE = `mutation($input: IdentityProviderInput!) { createIdentityProvider(input: $input) {
  __typename ... on IdentityProvider { id slug } ... on Error { message } } }`;

describe.each(backends)("identity providers per project on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const create = async (i: number) => {
    const res = await h.gql(CREATE, { input: { preset: "OIDC", slug: `idp-${i}`, issuer: `http://127.0.0.1:9/realm-${i}`, clientId: `client-${i}` } });
    expect(res.status).toBe(200);
    return res.body.data.createIdentityProvider;
  };
  const held = () => h.db.prisma.identityProvider.count({ where: { projectId: h.projectId } });

  it("takes 20, refuses the 21st with InvalidRequest even when adds race for the last places, and takes one again after a delete", async () => {
    expect(h.config.identityProvidersPerProject).toBe(20); // the default
    for (let i = 0; i < 18; i++) expect((await create(i)).__typename).toBe("IdentityProvider");

    const racing = await Promise.all([18, 19, 20, 21, 22].map(create));
    expect(racing.map((r) => r.__typename).sort()).toEqual(["IdentityProvider", "IdentityProvider", "InvalidRequest", "InvalidRequest", "InvalidRequest"]);
    expect(await held()).toBe(20);
    expect(racing.find((r) => r.__typename === "InvalidRequest")).toEqual({ __typename: "InvalidRequest", message: "a project holds at most 20 identity providers; delete one first" });

    // what a sign-in page reads stays within the bound
    const listed = await h.call("GET", "/auth/external/providers", { headers: { "x-api-key": h.publishableKey } });
    expect(listed.status).toBe(200);
    expect(listed.body.providers).toHaveLength(20);

    const some = racing.find((r) => r.__typename === "IdentityProvider");
    const deleted = await h.gql(`mutation($id: ID!) { deleteIdentityProvider(id: $id) { __typename } }`, { id: some.id });
    expect(deleted.body.data.deleteIdentityProvider.__typename).toBe("DeleteIdentityProviderPayload");
    expect((await create(23)).__typename).toBe("IdentityProvider");
    expect(await held()).toBe(20);
  });
});

describe.each(backends)("a raised or lowered cap of identity providers on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_IDENTITY_PROVIDERS_PER_PROJECT: "2" } });
  });
  afterAll(() => h?.close());

  it("follows LINKGATE_IDENTITY_PROVIDERS_PER_PROJECT", async () => {
    const create = (slug: string) => h.gql(CREATE, { input: { preset: "OIDC", slug, issuer: `http://127.0.0.1:9/${slug}`, clientId: slug } });
    expect((await create("one")).body.data.createIdentityProvider.__typename).toBe("IdentityProvider");
    expect((await create("two")).body.data.createIdentityProvider.__typename).toBe("IdentityProvider");
    expect((await create("three")).body.data.createIdentityProvider).toEqual({ __typename: "InvalidRequest", message: "a project holds at most 2 identity providers; delete one first" });
  });
});
