// A sign-in racing the deletion of the account it signs in to. The deletion goes first (it
// takes the account's lock first); the sign-in, queued behind it, then finds the account gone
// with everything it held, and decides again from what is there now: an external identity no
// account holds signs up a new account (user.created), as a code sign-in does
// (src/auth/sign-in.sql), and a passkey that went with its account is not registered. Before,
// both answered 401 "this account no longer exists": a sign-in, which has no session to have
// ended, refused with the answer of an ended session. The deleted account's only event is its
// user.deleted, and nothing after it names it (docs/events.md).
// Postgres only: a second connection holds the account's lock until the deletion, then the
// sign-in, wait for it, in that order.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serverUrl } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { harnessFor } from "./support/hooks.ts";
import { lockHolder, waitingForLock } from "./support/locks.ts";
import { PASSKEY_ORIGIN, passkeyAssertion, registerPasskey } from "./support/passkeys.ts";
import { authorize, complete, startExternalWorld, type ExternalWorld } from "./support/upstream-linkgate.ts";

const onPostgres = serverUrl ? describe : describe.skip;
const tag = `t${randomBytes(3).toString("hex")}`;
let seq = 0;
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** The user events written after `after` (seq), with the account each names. */
async function userEventsSince(h: Harness, after: bigint) {
  const rows = await h.db.prisma.outboxEvent.findMany({ where: { seq: { gt: after }, eventType: { startsWith: "user." } }, orderBy: { seq: "asc" } });
  return rows.map((e) => ({ type: e.eventType, user: JSON.parse(e.body).data.user.user_id as string }));
}
const lastSeq = async (h: Harness) => (await h.db.prisma.outboxEvent.findFirst({ orderBy: { seq: "desc" } }))?.seq ?? 0n;

/** deleteAccount, then `signIn`, both queued behind `blocker`'s lock of the account, in that order. */
async function deletedFirst<T>(h: Harness, blocker: pg.Client, account: { accountId: string; token: string }, signIn: () => Promise<T>) {
  await blocker.query("BEGIN");
  try {
    await blocker.query("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", [account.accountId]);
    const deletion = h.gql(`mutation { deleteAccount { __typename } }`, {}, bearer(account.token));
    await waitingForLock(blocker, 1);
    const signedIn = signIn();
    await waitingForLock(blocker, 2);
    await blocker.query("COMMIT");
    const [deleted, result] = await Promise.all([deletion, signedIn]);
    expect(deleted.body.data.deleteAccount.__typename, JSON.stringify(deleted.body)).toBe("DeleteAccountPayload");
    return result;
  } finally {
    await blocker.query("ROLLBACK").catch(() => {});
  }
}

onPostgres("a sign-in queued behind the deletion of its account", () => {
  let world: ExternalWorld;
  let passkeys: Harness;
  let blocker: pg.Client;
  let passkeyBlocker: pg.Client;
  beforeAll(async () => {
    [world, passkeys] = await Promise.all([startExternalWorld("postgres", "https://app.example/deleted"), startHarness("postgres")]);
    blocker = new pg.Client({ connectionString: world.h.db.url });
    passkeyBlocker = new pg.Client({ connectionString: passkeys.db.url });
    await Promise.all([blocker.connect(), passkeyBlocker.connect()]);
  });
  afterAll(async () => {
    await blocker?.end();
    await passkeyBlocker?.end();
    await world?.close();
    await passkeys?.close();
  });

  it("with an external identity: it signs up a new account; the deleted one is named by its user.deleted alone", async () => {
    const { h, google, app } = world;
    const person = { sub: `d-${tag}-${++seq}`, email: `d-${tag}-${seq}@example.com`, email_verified: false };
    google.loginAs(person);
    const first = await authorize(h, google, "google", app.redirectUri);
    const owner = await complete(h, first.started.state_id, first.code);
    expect(owner.status, JSON.stringify(owner.body)).toBe(200);
    const account = { accountId: owner.body.account_id as string, token: owner.body.access_token as string };
    const again = await authorize(h, google, "google", app.redirectUri);
    const since = await lastSeq(h);

    const signedIn = await deletedFirst(h, blocker, account, () => complete(h, again.started.state_id, again.code));

    expect(signedIn.status, JSON.stringify(signedIn.body)).toBe(200);
    expect(signedIn.body.account_id).not.toBe(account.accountId);
    expect(await h.db.prisma.account.count({ where: { id: account.accountId } })).toBe(0);
    expect(await userEventsSince(h, since)).toEqual([
      { type: "user.deleted", user: account.accountId },
      { type: "user.created", user: signedIn.body.account_id },
      { type: "user.authentication.success", user: signedIn.body.account_id },
    ]);
  });

  it("with a passkey: PasskeyInvalid, and no event after user.deleted", async () => {
    const h = passkeys;
    const owner = await h.signIn({ email: `p-${tag}-${++seq}@example.com` });
    const key = new SoftAuthenticator(PASSKEY_ORIGIN);
    await registerPasskey(h, owner.token, key);
    const assertion = await passkeyAssertion(h, key);
    const since = await lastSeq(h);

    const signedIn = await deletedFirst(h, passkeyBlocker, owner, () =>
      h.gql(`mutation($r: JSON!) { finishPasskeySignIn(response: $r) { __typename } }`, { r: assertion }, { "x-api-key": h.publishableKey }),
    );

    expect(signedIn.body.data?.finishPasskeySignIn?.__typename, JSON.stringify(signedIn.body)).toBe("PasskeyInvalid");
    expect(await userEventsSince(h, since)).toEqual([{ type: "user.deleted", user: owner.accountId }]);
  });
});

// `viewer` asked while the account is deleted on another device: the token's session was found
// live (the request's check waited for the deletion, on the session's once-a-minute touch, and
// read what was there when it began), then the account was gone, and viewer's findFirstOrThrow
// answered INTERNAL_SERVER_ERROR ("Unexpected error.", logged as a fault). The deletion ended the
// session: the answer is the ended session's, UNAUTHENTICATED (docs/authentication.md, "Sessions").
onPostgres("viewer asked while its account is deleted", () => {
  const h = harnessFor("postgres");
  const blocker = lockHolder(h);

  it("answers UNAUTHENTICATED, the session having ended, not a fault", async () => {
    const owner = await h.signIn({ email: `v-${tag}-${++seq}@example.com` });
    // the session's touch is due (last used over a minute ago): the check writes it, and waits for the deletion
    await blocker.query("UPDATE sessions SET last_used_at = now() - interval '2 minutes' WHERE account_id = $1", [owner.accountId]);
    await blocker.query("BEGIN");
    let viewer;
    try {
      await blocker.query("DELETE FROM accounts WHERE id = $1", [owner.accountId]);
      const asked = h.gql(`{ viewer { id name } }`, {}, bearer(owner.token));
      await waitingForLock(blocker, 1);
      await blocker.query("COMMIT");
      viewer = await asked;
    } finally {
      await blocker.query("ROLLBACK").catch(() => {});
    }
    expect(viewer.body.data).toBeNull();
    expect(viewer.body.errors).toMatchObject([{ message: "this session has ended; sign in again", extensions: { code: "UNAUTHENTICATED" } }]);
  });
});
