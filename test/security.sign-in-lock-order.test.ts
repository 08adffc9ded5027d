// A sign-in with a merged secondary's address or passkey locks the two accounts as every merge
// and unmerge locks them: both, in id order (src/db/locks.ts). It locked the secondary alone and then wrote
// to its primary, so a sign-in racing an unmerge deadlocked whenever the primary's id sorted
// first: the unmerge held the primary and waited for the secondary, the sign-in the other way
// round, until Postgres broke it after deadlock_timeout (1 s) and one of them was tried again.
// Postgres only: a second connection plays the unmerge's locks, the primary's first.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { serverUrl } from "./support/db.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { waitingForLock } from "./support/locks.ts";
import { PASSKEY_ORIGIN, passkeyAssertion, registerPasskey } from "./support/passkeys.ts";

const onPostgres = serverUrl ? describe : describe.skip;
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

onPostgres("a sign-in with a merged secondary's address or passkey, racing an unmerge", () => {
  let h: Harness;
  let unmerge: pg.Client;
  beforeAll(async () => {
    h = await startHarness("postgres");
    unmerge = new pg.Client({ connectionString: h.db.url });
    await unmerge.connect();
  });
  afterAll(async () => {
    await unmerge?.end();
    await h?.close();
  });

  /** Two accounts, the one whose id sorts first merging the other (the order in which the old sign-ins deadlocked); `before` runs on the secondary before the merge. */
  async function merged(name: string, before?: (secondary: { token: string }) => Promise<void>) {
    const emails = [`${name}-a@example.com`, `${name}-b@example.com`];
    const [a, b] = [await h.signIn({ email: emails[0] }), await h.signIn({ email: emails[1] })];
    const [primary, secondary, secondaryEmail] = a.accountId < b.accountId ? [a, b, emails[1]] : [b, a, emails[0]];
    await before?.(secondary);
    const req = await h.call("POST", "/users/link/request", { body: { email: secondaryEmail }, headers: bearer(primary.token) });
    const linked = await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp: await h.mailbox.otp(secondaryEmail) }, headers: bearer(primary.token) });
    expect(linked.body.outcome).toBe("merged");
    return { primary, secondary, secondaryEmail };
  }

  /**
   * `signIn` started while the unmerge holds the primary: it comes to wait for the primary, and
   * the unmerge's second lock, the secondary's, is free at once (NOWAIT), as the sign-in holds
   * nothing of the pair while it waits.
   */
  async function racingTheUnmerge<T>(pair: { primary: { accountId: string }; secondary: { accountId: string } }, signIn: () => Promise<T>): Promise<T> {
    await unmerge.query("BEGIN");
    try {
      await unmerge.query("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", [pair.primary.accountId]);
      const signingIn = signIn();
      await waitingForLock(unmerge, 1);
      await unmerge.query("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE NOWAIT", [pair.secondary.accountId]);
      await unmerge.query("COMMIT");
      return await signingIn;
    } finally {
      await unmerge.query("ROLLBACK").catch(() => {});
    }
  }

  it("with a code: waits for the primary the unmerge holds without holding the secondary it waits for", async () => {
    const pair = await merged("lock-order-code");
    const started = await h.call("POST", "/auth/otp/start", { body: { email: pair.secondaryEmail } });
    const code = await h.mailbox.otp(pair.secondaryEmail);
    const signedIn = await racingTheUnmerge(pair, () => h.call("POST", "/auth/otp/verify", { body: { state_id: started.body.state_id, otp: code } }));
    expect(signedIn.status, JSON.stringify(signedIn.body)).toBe(200);
    expect(signedIn.body.account_id).toBe(pair.primary.accountId);
  });

  it("with a passkey: the same", async () => {
    const key = new SoftAuthenticator(PASSKEY_ORIGIN);
    const pair = await merged("lock-order-passkey", (secondary) => registerPasskey(h, secondary.token, key).then(() => {}));
    const assertion = await passkeyAssertion(h, key);
    const signedIn = await racingTheUnmerge(pair, () =>
      h.gql(`mutation($r: JSON!) { finishPasskeySignIn(response: $r) { __typename ... on SignInTokens { accountId } } }`, { r: assertion }, { "x-api-key": h.publishableKey }),
    );
    expect(signedIn.body.data?.finishPasskeySignIn, JSON.stringify(signedIn.body)).toEqual({ __typename: "SignInTokens", accountId: pair.primary.accountId });
  });

  /**
   * The other way round: the secondary's id sorts first. The sign-in locks the pair in id order,
   * the secondary first; the unmerge (and the removal of the secondary's address, which is one)
   * locked the primary alone, then the secondary, so it held the primary while it waited for the
   * secondary the sign-in held, and the sign-in came to wait for the primary: deadlocked until
   * Postgres broke it after deadlock_timeout. The connection here plays the sign-in's locks.
   */
  for (const how of ["unmerge", "the removal of the secondary's address"] as const) {
    it(`${how} waits for the secondary a sign-in holds without holding the primary the sign-in waits for next`, async () => {
      const [a, b] = [`lock-order-${how.length}-a@example.com`, `lock-order-${how.length}-b@example.com`];
      const [ua, ub] = [await h.signIn({ email: a }), await h.signIn({ email: b })];
      // the account whose id sorts last is the primary
      const [primary, secondary, secondaryEmail] = ua.accountId > ub.accountId ? [ua, ub, b] : [ub, ua, a];
      const req = await h.call("POST", "/users/link/request", { body: { email: secondaryEmail }, headers: bearer(primary.token) });
      const linked = await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp: await h.mailbox.otp(secondaryEmail) }, headers: bearer(primary.token) });
      expect(linked.body.outcome).toBe("merged");

      const signIn = unmerge; // the second connection, playing a sign-in's locks this time
      await signIn.query("BEGIN");
      try {
        await signIn.query("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", [secondary.accountId]);
        const separating =
          how === "unmerge"
            ? h.call("POST", "/users/link/unmerge", { body: {}, headers: bearer(primary.token) })
            : h.call("POST", "/users/link/remove", { body: { email: secondaryEmail }, headers: bearer(primary.token) });
        await waitingForLock(signIn, 1);
        await signIn.query("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE NOWAIT", [primary.accountId]);
        await signIn.query("COMMIT");
        const done = await separating;
        expect(done.status, JSON.stringify(done.body)).toBe(200);
      } finally {
        await signIn.query("ROLLBACK").catch(() => {});
      }
      expect((await h.db.prisma.account.findUniqueOrThrow({ where: { id: primary.accountId } })).mergedWithId).toBeNull();
    });
  }
});
