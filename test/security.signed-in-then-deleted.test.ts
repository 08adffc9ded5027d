// A sign-in whose session is opened, and whose account is deleted (on another device, or its
// session otherwise gone) before its tokens are signed. The session was committed; the tokens are
// signed from the account and session read after it, and those were gone: the sign-in answered
// OTPInvalid, an error no passkey operation lists, which GraphQL masked as "Unexpected error."
// (logged as a fault) and REST answered as a wrong code. The session it opened has ended: the
// answer is the ended session's, UNAUTHENTICATED, as a code sign-in's retry gets once its session
// ended (docs/authentication.md, "Sessions").
// Postgres only: a trigger holds the sign-in's transaction after its session is written, a second
// connection queues for the sessions table behind it, deletes the account once the sign-in has
// committed, and commits only once the token read waits for it.
import { describe, expect, it } from "vitest";
import { serverUrl } from "./support/db.ts";
import { harnessFor } from "./support/hooks.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { lockHolder, waitingForLock } from "./support/locks.ts";
import { PASSKEY_ORIGIN, passkeyAssertion, registerPasskey } from "./support/passkeys.ts";

const onPostgres = serverUrl ? describe : describe.skip;
const HOLD = 7_346_021;

onPostgres("a sign-in whose account is deleted once its session is written", () => {
  const h = harnessFor("postgres");
  const holder = lockHolder(h);
  const deleter = lockHolder(h);

  it("a passkey sign-in answers UNAUTHENTICATED (the session has ended), not a fault", async () => {
    const owner = await h.signIn({ email: "signed.then.deleted@example.com" });
    const key = new SoftAuthenticator(PASSKEY_ORIGIN);
    await registerPasskey(h, owner.token, key);
    const assertion = await passkeyAssertion(h, key);

    await deleter.query(`CREATE OR REPLACE FUNCTION test_hold_sign_in() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_advisory_xact_lock(${HOLD}); RETURN NEW; END $$`);
    await deleter.query(`CREATE TRIGGER test_hold_sign_in AFTER INSERT ON sessions FOR EACH ROW
      WHEN (NEW.account_id = '${owner.accountId}') EXECUTE FUNCTION test_hold_sign_in()`);
    let signedIn;
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT pg_advisory_xact_lock($1)", [HOLD]);
      signedIn = h.gql(`mutation($r: JSON!) { finishPasskeySignIn(response: $r) { __typename } }`, { r: assertion }, { "x-api-key": h.publishableKey });
      await waitingForLock(holder, 1); // the session is written, the sign-in not yet committed
      await deleter.query("BEGIN");
      const queued = deleter.query("LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE");
      await waitingForLock(holder, 2);
      await holder.query("COMMIT"); // the sign-in commits; the deleter has the table
      await queued;
      await deleter.query("DELETE FROM accounts WHERE id = $1", [owner.accountId]);
      await waitingForLock(holder, 1); // the tokens' read of the session waits for the deletion
      await deleter.query("COMMIT");
      signedIn = await signedIn;
    } finally {
      await holder.query("ROLLBACK").catch(() => {});
      await deleter.query("ROLLBACK").catch(() => {});
      await deleter.query("DROP TRIGGER IF EXISTS test_hold_sign_in ON sessions");
    }
    expect(signedIn.body.data, JSON.stringify(signedIn.body)).toBeNull();
    expect(signedIn.body.errors).toMatchObject([{ message: "this session has ended; sign in again", extensions: { code: "UNAUTHENTICATED" } }]);
  });
});
