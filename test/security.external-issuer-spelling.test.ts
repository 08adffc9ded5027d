// A GitHub provider's issuer spelled again the same URL (docs/external-identities.md, "Removing
// and unmerging"). A GitHub identity is <the provider's issuer, as stored>#<user id>: GitHub has no
// ID token whose `iss` would say it. An update naming the same URL spelled otherwise (a host in
// capitals, an explicit :443; here 127.1 for 127.0.0.1) was taken as the same issuer, so nothing
// was detached, but the provider stored the new spelling: its users' next sign-ins made new
// accounts beside theirs, while their old identities still counted as a way their accounts sign
// in, so an account's last address could be removed, leaving it no way in at all. A provider
// deleted and added again spelled otherwise did the same to all its users.
import { describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { externalLink, externalSignIn, externalWorldFor } from "./support/upstream-linkgate.ts";

const REDIRECT = "https://app-spelling.example/cb";
const CREATE = `mutation($input: IdentityProviderInput!) { createIdentityProvider(input: $input) {
  __typename ... on IdentityProvider { id issuer callbackUrl } ... on Error { message } } }`;
const DELETE = `mutation($id: ID!) { deleteIdentityProvider(id: $id) { __typename ... on Error { message } } }`;
const UPDATE = `mutation($id: ID!, $input: IdentityProviderInput!) { updateIdentityProvider(id: $id, input: $input) {
  __typename ... on IdentityProvider { issuer } ... on Error { message } } }`;

describe.each(backends)("a GitHub provider's issuer spelled again on %s", (backend) => {
  const { h, github } = externalWorldFor(backend, REDIRECT);

  it("is the same issuer: its users sign in to their accounts, and their identities still count as a way in", async () => {
    const stamp = Date.now();
    const email = `spelling-${stamp}@example.com`;
    const owner = await h.signIn({ email });
    const user = { id: 900_000 + (stamp % 100_000), login: `octo-spelling`, name: "Octo", email: null, emails: [] };
    github.loginAs(user);
    // a provider stored before issuers were stored as their URLs spell them: its spelling as given
    const provider = await h.db.prisma.identityProvider.findFirstOrThrow({ where: { projectId: h.projectId, slug: "github" } });
    const legacy = github.baseUrl.replace("127.0.0.1", "127.1");
    await h.db.prisma.identityProvider.update({ where: { id: provider.id }, data: { issuer: legacy } });
    const linked = await externalLink(h, github, "github", REDIRECT, owner.token);
    expect(linked.body).toMatchObject({ outcome: "attached" });

    // the admin writes the same URL as it is usually spelled
    expect(new URL(legacy).href).toBe(new URL(github.baseUrl).href);
    const updated = await h.gql(UPDATE, { id: provider.id, input: { issuer: github.baseUrl } });
    expect(updated.body.data.updateIdentityProvider.__typename).toBe("IdentityProvider");

    // the same GitHub user signs in to the account it was linked to, not to a new one
    const again = await externalSignIn(h, github, "github", REDIRECT);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.account_id).toBe(owner.accountId);
    const identities = await h.db.prisma.identifier.findMany({ where: { projectId: h.projectId, kind: "external", value: { endsWith: `#${user.id}` } } });
    expect(identities.map((i) => i.value)).toEqual([`${legacy}#${user.id}`]);
    await h.db.prisma.identityProvider.update({ where: { id: provider.id }, data: { issuer: github.baseUrl } });
  });

  it("added again after a deletion, spelled otherwise, signs its users in to their accounts again", async () => {
    const stamp = Date.now();
    const user = { id: 800_000 + (stamp % 100_000), login: "octo-again", name: "Octo", email: null, emails: [] };
    github.loginAs(user);
    const first = await externalSignIn(h, github, "github", REDIRECT);
    expect(first.status, JSON.stringify(first.body)).toBe(200);

    const old = await h.db.prisma.identityProvider.findFirstOrThrow({ where: { projectId: h.projectId, slug: "github" } });
    expect((await h.gql(DELETE, { id: old.id })).body.data.deleteIdentityProvider.__typename).toBe("DeleteIdentityProviderPayload");
    // "it signs in again once a provider of the same issuer is added" (docs/external-identities.md)
    const respelled = github.baseUrl.replace("127.0.0.1", "127.1");
    const created = await h.gql(CREATE, { input: { preset: "GITHUB", slug: "github", issuer: respelled, clientId: github.clientId, clientSecret: github.clientSecret, scopes: ["read:user", "user:email"] } });
    const provider = created.body.data.createIdentityProvider;
    expect(provider.__typename, JSON.stringify(provider)).toBe("IdentityProvider");
    github.addRedirectUri(provider.callbackUrl);

    const again = await externalSignIn(h, github, "github", REDIRECT);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.account_id).toBe(first.body.account_id);
  });
});
