// A merged secondary's passkeys sign into the primary (docs/authentication.md, passkeys), so the
// primary's user must see them and be able to take them away without undoing the merge. They
// were listed nowhere the primary could see, and rename and remove answered "no such passkey":
// a passkey someone registered on an address before its owner merged it kept a way into the
// owner's account, invisible on /account, until an unmerge.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { backends } from "./support/db.ts";
import { PASSKEY_ORIGIN, passkeyAssertion, registerPasskey, signInWithPasskey } from "./support/passkeys.ts";

const tag = `t${randomBytes(3).toString("hex")}`;
let seq = 0;
const email = (name: string) => `${name}-${tag}-${++seq}@example.com`;
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe.each(backends)("a merged secondary's passkeys on the primary, on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const viewerPasskeys = async (token: string) =>
    (await h.gql("{ viewer { passkeys { edges { node { id } } } mergedSecondary { passkeys { edges { node { id name } } } } } }", {}, bearer(token))).body.data.viewer;

  /** The token's account links `address` with the code sent there. */
  async function link(token: string, address: string, outcome: "merged" | "attached") {
    const req = await h.call("POST", "/users/link/request", { body: { email: address }, headers: bearer(token) });
    expect(req.status, JSON.stringify(req.body)).toBe(200);
    const verify = await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp: await h.mailbox.otp(address) }, headers: bearer(token) });
    expect(verify.body).toMatchObject({ outcome });
  }

  /** A secondary with a passkey of its own, merged into a primary. */
  async function mergedWithPasskey() {
    const secondaryMail = email("second");
    const secondary = await h.signIn({ email: secondaryMail });
    const key = new SoftAuthenticator(PASSKEY_ORIGIN);
    const passkeyId = await registerPasskey(h, secondary.token, key);
    const primary = await h.signIn({ email: email("first") });
    await link(primary.token, secondaryMail, "merged");
    return { secondary, key, passkeyId, primary };
  }

  it("the primary's user sees them, over GraphQL and REST, apart from the account's own", async () => {
    const { passkeyId, primary } = await mergedWithPasskey();
    const viewer = await viewerPasskeys(primary.token);
    expect(viewer.passkeys.edges).toEqual([]);
    expect(viewer.mergedSecondary.passkeys.edges).toEqual([{ node: { id: passkeyId, name: "Passkey" } }]);
    const list = await h.call("GET", "/auth/passkey/list", { headers: bearer(primary.token) });
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ passkeys: [], merged_secondary_passkeys: [{ id: passkeyId, name: "Passkey" }] });
  });

  it("renames and removes one: its sessions end, it signs in nowhere, the unmerge gives back the rest", async () => {
    const { secondary, key, passkeyId, primary } = await mergedWithPasskey();
    const viaPasskey = await signInWithPasskey(h, key);
    expect((await h.gql("{ viewer { id } }", {}, bearer(viaPasskey))).body.data.viewer.id).toBe(primary.accountId);

    const renamed = await h.call("POST", "/auth/passkey/rename", { body: { id: passkeyId, name: "Found in a drawer" }, headers: bearer(primary.token) });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
    const removed = await h.gql(`mutation($id: ID!) { removePasskey(id: $id) { __typename ... on RemovePasskeyPayload { removedId } } }`, { id: passkeyId }, bearer(primary.token));
    expect(removed.body.data.removePasskey).toEqual({ __typename: "RemovePasskeyPayload", removedId: passkeyId });

    expect((await h.call("GET", "/oauth/userinfo", { headers: bearer(viaPasskey) })).status).toBe(401);
    const again = await h.gql(`mutation($r: JSON!) { finishPasskeySignIn(response: $r) { __typename } }`, { r: await passkeyAssertion(h, key) }, { "x-api-key": h.publishableKey });
    expect(again.body.data.finishPasskeySignIn.__typename).toBe("PasskeyInvalid");
    expect((await viewerPasskeys(primary.token)).mergedSecondary.passkeys.edges).toEqual([]);
    const updated = await h.db.prisma.outboxEvent.findMany({ where: { eventType: "user.updated", body: { contains: passkeyId } } });
    expect(updated.map((e) => JSON.parse(e.body).data)).toEqual([expect.objectContaining({ user: expect.objectContaining({ user_id: primary.accountId }), passkey_removed: { id: passkeyId } })]);

    expect((await h.call("POST", "/users/link/unmerge", { body: {}, headers: bearer(primary.token) })).status).toBe(200);
    expect(await h.db.prisma.passkey.count({ where: { accountId: { in: [primary.accountId, secondary.accountId] } } })).toBe(0);
  });

  it("what a session signed in with it added stays proven through the secondary: the unmerge still removes it", async () => {
    const { key, passkeyId, primary } = await mergedWithPasskey();
    const added = email("added-with-the-passkey");
    await link(await signInWithPasskey(h, key), added, "attached");

    expect((await h.call("POST", "/auth/passkey/remove", { body: { id: passkeyId }, headers: bearer(primary.token) })).status).toBe(200);
    const before = await h.gql("{ viewer { identifiers { value leavesOnUnmerge } } }", {}, bearer(primary.token));
    expect(before.body.data.viewer.identifiers).toContainEqual({ value: added, leavesOnUnmerge: true });

    expect((await h.call("POST", "/users/link/unmerge", { body: {}, headers: bearer(primary.token) })).status).toBe(200);
    const after = await h.gql("{ viewer { identifiers { value } } }", {}, bearer(primary.token));
    expect(after.body.data.viewer.identifiers.map((i: { value: string }) => i.value)).not.toContain(added);
  });

  it("another account's user finds neither a merged secondary's passkey nor their own way to it", async () => {
    const { passkeyId } = await mergedWithPasskey();
    const stranger = await h.signIn({ email: email("stranger") });
    for (const [path, body] of [
      ["/auth/passkey/rename", { id: passkeyId, name: "mine now" }],
      ["/auth/passkey/remove", { id: passkeyId }],
    ] as const) {
      const r = await h.call("POST", path, { body, headers: bearer(stranger.token) });
      expect(r.status, path).toBe(404);
    }
    expect((await h.call("GET", "/auth/passkey/list", { headers: bearer(stranger.token) })).body).toEqual({ passkeys: [], merged_secondary_passkeys: [] });
    expect(await h.db.prisma.passkey.findUnique({ where: { id: passkeyId }, select: { name: true } })).toEqual({ name: "Passkey" });
  });
});
