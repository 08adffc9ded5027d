// A sign-in racing the removal of what it proves cannot leave a live session tied to something the
// account no longer holds (docs/security.md, "Stolen sessions"). Both take the account's lock
// before they look: whichever goes second sees what the first did. Before, a passkey sign-in that
// was past its checks when the owner removed the passkey opened a session that nothing would end.
// Postgres only: a second connection holds the account's lock while the sign-in, then the
// removal, come to wait for it, in that order.
import pg from "pg";
import { describe, expect, it } from "vitest";
import { serverUrl } from "./support/db.ts";
import { harnessFor } from "./support/hooks.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { lockHolder, waitingForLock } from "./support/locks.ts";
import { PASSKEY_ORIGIN, passkeyAssertion, registerPasskey } from "./support/passkeys.ts";

const onPostgres = serverUrl ? describe : describe.skip;

onPostgres("a session's proof removed while it is being proved", () => {
  const h = harnessFor("postgres");
  const blocker = lockHolder(h);

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  const waiting = (n: number) => waitingForLock(blocker, n);

  it("a passkey sign-in past its checks when the passkey is removed leaves no live session signed in with it", async () => {
    const owner = await h.signIn({ email: "raced.owner@example.com" });
    const key = new SoftAuthenticator(PASSKEY_ORIGIN);
    const passkeyId = await registerPasskey(h, owner.token, key);
    const assertion = await passkeyAssertion(h, key);

    await blocker.query("BEGIN");
    await blocker.query("SELECT id FROM accounts WHERE id = $1 FOR UPDATE", [owner.accountId]);
    const signIn = h.gql(`mutation($r: JSON!) { finishPasskeySignIn(response: $r) { __typename } }`, { r: assertion }, { "x-api-key": h.publishableKey });
    await waiting(1); // checked the assertion, now waits to open its session
    const remove = h.gql(`mutation($id: ID!) { removePasskey(id: $id) { __typename } }`, { id: passkeyId }, bearer(owner.token));
    await waiting(2);
    await blocker.query("COMMIT");
    const [signedIn, removed] = await Promise.all([signIn, remove]);

    expect(removed.body.data.removePasskey.__typename).toBe("RemovePasskeyPayload");
    expect(["SignInTokens", "PasskeyInvalid"]).toContain(signedIn.body.data.finishPasskeySignIn.__typename);
    expect(await h.db.prisma.session.count({ where: { signedInWith: passkeyId, endedAt: null } })).toBe(0);
  });
});
