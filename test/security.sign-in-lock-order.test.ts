// A sign-in with a merged secondary's address locks the two accounts as every merge and unmerge
// locks them: both, in id order (src/db/locks.ts). It locked the secondary alone and then wrote
// to its primary, so a sign-in racing an unmerge deadlocked whenever the primary's id sorted
// first: the unmerge held the primary and waited for the secondary, the sign-in the other way
// round, until Postgres broke it after deadlock_timeout (1 s) and one of them was tried again.
// Postgres only: a second connection plays the unmerge's locks, the primary's first.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { serverUrl } from "./support/db.ts";
import { waitingForLock } from "./support/locks.ts";

const onPostgres = serverUrl ? describe : describe.skip;
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

onPostgres("a sign-in with a merged secondary's address, racing an unmerge", () => {
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

  it("waits for the primary the unmerge holds without holding the secondary the unmerge waits for", async () => {
    const a = await h.signIn({ email: "lock-order-a@example.com" });
    const b = await h.signIn({ email: "lock-order-b@example.com" });
    // the account whose id sorts first merges the other: the order in which the old sign-in deadlocked
    const [primary, secondary] = a.accountId < b.accountId ? [a, b] : [b, a];
    const secondaryEmail = secondary === a ? "lock-order-a@example.com" : "lock-order-b@example.com";
    const req = await h.call("POST", "/users/link/request", { body: { email: secondaryEmail }, headers: bearer(primary.token) });
    const linked = await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp: await h.mailbox.otp(secondaryEmail) }, headers: bearer(primary.token) });
    expect(linked.body.outcome).toBe("merged");

    const started = await h.call("POST", "/auth/otp/start", { body: { email: secondaryEmail } });
    const code = await h.mailbox.otp(secondaryEmail);
    await unmerge.query("BEGIN");
    try {
      await unmerge.query("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", [primary.accountId]);
      const signIn = h.call("POST", "/auth/otp/verify", { body: { state_id: started.body.state_id, otp: code } });
      await waitingForLock(unmerge, 1);
      // the unmerge's second lock: free, as the sign-in waits for the primary holding nothing of the pair
      await unmerge.query("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE NOWAIT", [secondary.accountId]);
      await unmerge.query("COMMIT");
      const signedIn = await signIn;
      expect(signedIn.status, JSON.stringify(signedIn.body)).toBe(200);
      expect(signedIn.body.account_id).toBe(primary.accountId);
    } finally {
      await unmerge.query("ROLLBACK").catch(() => {});
    }
  });
});
