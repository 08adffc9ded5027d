// An identifier removed while the project's admin deletes (or re-points) the identity provider of
// the account's other sign-in (docs/external-identities.md, "Removing and unmerging"). The removal
// is allowed only while an identifier that can still sign in stays; a provider that is being
// deleted signs nobody in any more, so a removal that comes while it is deleted must be refused.
// Before, the provider's deletion took no account lock: the removal counted the identity as
// still signing in, and the account was left with nothing but an identity of a deleted provider.
// Both take the account's lock now, so one of the two goes first and the other sees what it did.
// Postgres only: a second connection holds the identity's row, which the deletion comes to wait
// for halfway (it detaches the identity), and the removal is started only then.
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { serverUrl } from "./support/db.ts";
import { lockHolder, lockWaiters, otherConnections, waitingForLock } from "./support/locks.ts";
import { startUpstreamOidc, type UpstreamOidc } from "./support/upstream.ts";
import { addProvider, externalLink, externalValue, externalWorldFor } from "./support/upstream-linkgate.ts";

const onPostgres = serverUrl ? describe : describe.skip;
const tag = `t${randomBytes(3).toString("hex")}`;
let seq = 0;

onPostgres("removing an identifier while the provider of the account's other sign-in goes away", () => {
  const world = externalWorldFor("postgres", "https://app.example/raced");
  const { h } = world;
  const blocker = lockHolder(h);

  const auth = (token: string) => ({ authorization: `Bearer ${token}` });

  /** "answered" once `request` answered, "waiting" once `n` statements wait for a lock: whichever comes first (bounded: 10 s). */
  async function firstOf(request: Promise<unknown>, n: number): Promise<"answered" | "waiting"> {
    let answered = false;
    void request.then(() => (answered = true), () => (answered = true));
    for (let i = 0; i < 1000 && !answered; i++) {
      if ((await lockWaiters(blocker)) >= n) return "waiting";
      await new Promise((r) => setTimeout(r, 10));
    }
    if (answered) return "answered";
    throw new Error(`the removal neither answered nor came to wait; the database's other connections: ${JSON.stringify(await otherConnections(blocker))}`);
  }

  /** A mail account with an identity of its own provider `slug` attached: two ways in. */
  async function twoWaysIn(up: UpstreamOidc, slug: string) {
    const { id: providerId } = await addProvider(h, up, slug);
    const mail = `mail-${tag}-${++seq}@example.com`;
    const user = await h.signIn({ email: mail });
    const sub = `s-${tag}-${++seq}`;
    up.loginAs({ sub, email: `other-${tag}-${seq}@example.com`, email_verified: false });
    const linked = await externalLink(h, up, slug, world.app.redirectUri, user.token);
    expect(linked.status, JSON.stringify(linked.body)).toBe(200);
    const identity = await h.db.prisma.identifier.findFirstOrThrow({ where: { accountId: user.accountId, kind: "external", value: externalValue(up, sub) } });
    return { user, mail, providerId, identityId: identity.id };
  }

  /**
   * `change` (the admin's) is let in first and comes to wait halfway, on the identity's row the
   * blocker holds; then the user removes the address. The removal must end as it would after
   * the change: refused, the address kept.
   */
  async function raced(change: (providerId: string) => Promise<{ body: any }>, up: UpstreamOidc, slug: string) {
    const { user, mail, providerId, identityId } = await twoWaysIn(up, slug);
    await blocker.query("BEGIN");
    try {
      await blocker.query("SELECT 1 FROM external_identities WHERE identifier_id = $1 FOR UPDATE", [identityId]);
      const changed = change(providerId);
      await waitingForLock(blocker, 1);
      const removal = h.call("POST", "/users/link/remove", { body: { email: mail }, headers: auth(user.token) });
      // the removal either comes to wait behind the change too, or (the defect) is done already
      const settled = await firstOf(removal, 2);
      await blocker.query("COMMIT");
      const [removed, done] = await Promise.all([removal, changed]);
      expect(done.body.errors, JSON.stringify(done.body)).toBeUndefined();
      expect({ settled, status: removed.status, error: removed.body.error }).toEqual({ settled: "waiting", status: 409, error: "LastIdentifier" });
      expect(await h.db.prisma.identifier.count({ where: { accountId: user.accountId, kind: "email", value: mail } })).toBe(1);
      expect(await h.db.prisma.externalIdentity.findUnique({ where: { identifierId: identityId }, select: { providerId: true } })).toEqual({ providerId: null });
    } finally {
      await blocker.query("ROLLBACK").catch(() => {});
    }
  }

  it("a provider deleted meanwhile: the removal waits for the deletion, then LastIdentifier", async () => {
    const up = await startUpstreamOidc();
    try {
      await raced(
        (id) => h.gql(`mutation($id: ID!) { deleteIdentityProvider(id: $id) { __typename ... on DeleteIdentityProviderPayload { deletedId } } }`, { id }),
        up,
        `gone-${++seq}`,
      );
    } finally {
      await up.stop();
    }
  });

  it("a provider pointed at another issuer meanwhile: the removal waits for the change, then LastIdentifier", async () => {
    const up = await startUpstreamOidc();
    try {
      const { google } = world;
      await raced(
        (id) =>
          h.gql(`mutation($id: ID!, $input: IdentityProviderInput!) { updateIdentityProvider(id: $id, input: $input) { __typename } }`, {
            id,
            input: { issuer: google.issuer, clientId: google.clientId, clientSecret: google.clientSecret },
          }),
        up,
        `moved-${++seq}`,
      );
    } finally {
      await up.stop();
    }
  });
});
