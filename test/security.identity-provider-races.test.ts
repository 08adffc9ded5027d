// An identity provider changed while another request deletes it (docs/external-identities.md,
// "Providers"). updateIdentityProvider read the provider, then wrote it with Prisma's update,
// which throws when no row matches: a deletion committed in between answered
// INTERNAL_SERVER_ERROR ("Unexpected error.", logged as a fault) instead of ProviderNotFound. It
// answers ProviderNotFound now and changes nothing. Of two deletions at the same moment, the
// second read the provider before the first committed, found nothing left to delete, and
// answered that it had deleted it too; it is ProviderNotFound now.
// Postgres only: a second connection deletes the provider and holds its row until the request's
// write comes to wait for it, then commits; on PGlite one connection serves everything in turn.
import { describe, expect, it } from "vitest";
import { serverUrl } from "./support/db.ts";
import { harnessFor } from "./support/hooks.ts";
import { committedUnder, lockHolder, waitingForLock } from "./support/locks.ts";
import { startUpstreamOidc } from "./support/upstream.ts";
import { addProvider, authorize, complete, confirm, externalWorldFor, start } from "./support/upstream-linkgate.ts";

const onPostgres = serverUrl ? describe : describe.skip;

const UPDATE = `mutation($id: ID!, $input: IdentityProviderInput!) { updateIdentityProvider(id: $id, input: $input) { __typename ... on Error { message } ... on IdentityProvider { id displayName issuer } } }`;

onPostgres("an identity provider deleted while a request changes it", () => {
  const h = harnessFor("postgres");
  const blocker = lockHolder(h);
  let n = 0;

  async function newProvider(): Promise<string> {
    const created = await h.gql(`mutation($slug: String!) { createIdentityProvider(input: {preset: OIDC, slug: $slug, issuer: "https://127.0.0.1:9", clientId: "c"}) { __typename ... on IdentityProvider { id } ... on Error { message } } }`, { slug: `p${++n}` });
    const id = created.body.data?.createIdentityProvider?.id;
    if (!id) throw new Error(JSON.stringify(created.body));
    return id;
  }

  it.each([
    ["its display name", { displayName: "Renamed" }],
    ["its issuer", { issuer: "https://127.0.0.2:9" }],
  ])("an update of %s answers ProviderNotFound, not a fault", async (_, input) => {
    const id = await newProvider();
    const updated = await committedUnder(blocker, "DELETE FROM identity_providers WHERE id = $1", [id], () => h.gql(UPDATE, { id, input }));
    expect(updated.body.errors).toBeUndefined();
    expect(updated.body.data.updateIdentityProvider).toEqual({ __typename: "ProviderNotFound", message: expect.any(String) });
    expect(await h.db.prisma.identityProvider.count({ where: { id } })).toBe(0);
  });

  it("of two deletions at the same moment, the second is ProviderNotFound, not a second deletion", async () => {
    const id = await newProvider();
    const deleted = await committedUnder(blocker, "DELETE FROM identity_providers WHERE id = $1", [id], () => h.gql(`mutation($id: ID!) { deleteIdentityProvider(id: $id) { __typename ... on Error { message } } }`, { id }));
    expect(deleted.body.errors).toBeUndefined();
    expect(deleted.body.data.deleteIdentityProvider).toEqual({ __typename: "ProviderNotFound", message: expect.any(String) });
  });

  it("an update of a provider that stays answers it as it is now", async () => {
    const id = await newProvider();
    const updated = await h.gql(UPDATE, { id, input: { displayName: "Kept" } });
    expect(updated.body.data.updateIdentityProvider).toMatchObject({ __typename: "IdentityProvider", id, displayName: "Kept" });
  });
});

// An external sign-in started while the project deletes its provider: the start read the
// provider, fetched its discovery document, then wrote the flow, whose foreign key check failed
// once the deletion committed; the app got 500 InternalError instead of ProviderNotFound.
onPostgres("an external sign-in started while its provider is deleted", () => {
  const world = externalWorldFor("postgres", "https://app.example/started");
  const { h } = world;
  const blocker = lockHolder(h);
  let n = 0;

  it("answers ProviderNotFound, not a fault, and keeps no flow", async () => {
    const up = await startUpstreamOidc();
    try {
      const slug = `gone-${++n}`;
      const { id } = await addProvider(h, up, slug);
      await start(h, slug, world.app.redirectUri); // its discovery is fetched and cached: the raced start goes straight to its write
      await h.db.prisma.externalFlow.deleteMany({ where: { providerId: id } });
      await blocker.query("BEGIN");
      try {
        await blocker.query("DELETE FROM identity_providers WHERE id = $1", [id]);
        const started = start(h, slug, world.app.redirectUri);
        await waitingForLock(blocker, 1);
        await blocker.query("COMMIT");
        const answer = await started;
        expect({ status: answer.status, error: answer.body.error }).toEqual({ status: 404, error: "ProviderNotFound" });
      } finally {
        await blocker.query("ROLLBACK").catch(() => {});
      }
      expect(await h.db.prisma.externalFlow.count({ where: { providerId: id } })).toBe(0);
    } finally {
      await up.stop();
    }
  });
});


// An external sign-in whose identity's verified e-mail an account holds, completed while the
// project deletes its provider: the completion took its flow, sent the e-mail's code, then wrote
// the flow's answer with Prisma's update, which threw once the deletion (which ends the
// provider's flows) had committed: the app got 500 InternalError. It is ExternalSignInFailed now,
// and the code that went out confirms nothing.
onPostgres("an external sign-in asking for its e-mail's code while its provider is deleted", () => {
  const world = externalWorldFor("postgres", "https://app.example/asked");
  const { h } = world;
  const blocker = lockHolder(h);

  it("answers ExternalSignInFailed, not a fault, and the code sent signs nobody in", async () => {
    const up = await startUpstreamOidc();
    try {
      const { id } = await addProvider(h, up, "asked");
      const mail = `asked-${id.toLowerCase()}@example.com`;
      await h.signIn({ email: mail });
      up.loginAs({ sub: `asked-${id}`, email: mail, email_verified: true, name: "Ada" });
      const { started, code } = await authorize(h, up, "asked", world.app.redirectUri);
      await blocker.query("BEGIN");
      let answer;
      try {
        // the completion decides (its flow taken), then waits to store the e-mail's code state;
        // the provider is deleted meanwhile
        await blocker.query("LOCK TABLE otp_states IN EXCLUSIVE MODE");
        const completed = complete(h, started.state_id, code);
        await waitingForLock(blocker, 1);
        await blocker.query("DELETE FROM identity_providers WHERE id = $1", [id]);
        await blocker.query("COMMIT");
        answer = await completed;
      } finally {
        await blocker.query("ROLLBACK").catch(() => {});
      }
      expect({ status: answer.status, error: answer.body.error }).toEqual({ status: 400, error: "ExternalSignInFailed" });
      const state = await h.db.prisma.otpState.findFirstOrThrow({ where: { purpose: "external_confirm", value: mail } });
      const confirmed = await confirm(h, state.id, await h.mailbox.otp(mail));
      expect({ status: confirmed.status, error: confirmed.body.error }).toEqual({ status: 400, error: "ExternalSignInFailed" });
    } finally {
      await up.stop();
    }
  });
});
