// A request that was authenticated a moment before its session ended must not write (24th
// review). The session is checked when the request arrives, and a merge, a removal or a sign-out
// on another gateway may end it before the request's transaction locks the account. An
// intruder's late link verify then attached his address after the owner removed his way in, a
// passkey registered on an account merged away signed in to its primary, and a rename landed on a
// merged secondary. Each write now checks the session again under the account's lock.
// Postgres only: a second connection holds the account's lock while the request comes to wait
// for it, ends the session as the racing change would, and lets go.
import pg from "pg";
import { describe, expect, it } from "vitest";
import { serverUrl } from "./support/db.ts";
import { harnessFor } from "./support/hooks.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { lockHolder, waitingForLock } from "./support/locks.ts";
import { PASSKEY_ORIGIN, passkeyAssertion, registerPasskey } from "./support/passkeys.ts";

const onPostgres = serverUrl ? describe : describe.skip;

onPostgres("a session ended while its request waits for the account", () => {
  const h = harnessFor("postgres");
  const blocker = lockHolder(h);

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  /** Sends `request` while the account is locked, ends the session meanwhile, then lets go. */
  async function endedWhileWaiting<T>(accountId: string, sessionId: string, request: () => Promise<T>): Promise<T> {
    await blocker.query("BEGIN");
    await blocker.query("SELECT id FROM accounts WHERE id = $1 FOR UPDATE", [accountId]);
    const sent = request();
    await waitingForLock(blocker);
    await blocker.query("UPDATE sessions SET ended_at = now() WHERE id = $1", [sessionId]);
    await blocker.query("COMMIT");
    return sent;
  }

  const sessionOf = (token: string) => JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()).sid as string;

  it("a link verify whose session ended attaches nothing: 401", async () => {
    const intruder = await h.signIn({ email: "ended.link@example.com" });
    const req = await h.call("POST", "/users/link/request", { body: { email: "intruder.addr@example.com" }, headers: bearer(intruder.token) });
    const otp = await h.mailbox.otp("intruder.addr@example.com");
    const verify = await endedWhileWaiting(intruder.accountId, sessionOf(intruder.token), () =>
      h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp }, headers: bearer(intruder.token) }),
    );
    expect(verify.status, JSON.stringify(verify.body)).toBe(401);
    expect(await h.db.prisma.identifier.count({ where: { value: "intruder.addr@example.com" } })).toBe(0);
  });

  it("a passkey registration whose session ended adds no passkey: 401, not a 500", async () => {
    const owner = await h.signIn({ email: "ended.passkey@example.com" });
    const key = new SoftAuthenticator(PASSKEY_ORIGIN);
    const opts = await h.gql(`mutation { startPasskeyRegistration { ... on PasskeyCreationOptions { options } } }`, {}, bearer(owner.token));
    const response = key.create(opts.body.data.startPasskeyRegistration.options);
    const finish = await endedWhileWaiting(owner.accountId, sessionOf(owner.token), () =>
      h.gql(`mutation($r: JSON!) { finishPasskeyRegistration(response: $r) { __typename } }`, { r: response }, bearer(owner.token)),
    );
    expect(finish.body.errors?.[0]?.extensions?.code, JSON.stringify(finish.body)).toBe("UNAUTHENTICATED");
    expect(await h.db.prisma.passkey.count({ where: { accountId: owner.accountId } })).toBe(0);
  });

  it("a rename whose session ended changes nothing, and GraphQL says UNAUTHENTICATED, not an unexpected error", async () => {
    const owner = await h.signIn({ email: "ended.rename@example.com" });
    const renamed = await endedWhileWaiting(owner.accountId, sessionOf(owner.token), () =>
      h.gql(`mutation { updateProfile(name: "Renamed late") { __typename } }`, {}, bearer(owner.token)),
    );
    expect(renamed.body.errors?.[0]?.extensions?.code, JSON.stringify(renamed.body)).toBe("UNAUTHENTICATED");
    expect((await h.db.prisma.account.findUnique({ where: { id: owner.accountId } }))?.name).toBeNull();
  });

  // 26th review: the same for what the first fix left out. An intruder's request queued behind
  // the owner's unmerge (which ended his session) deleted the account, or removed an address.
  it("an account deletion whose session ended deletes nothing", async () => {
    const owner = await h.signIn({ email: "ended.delete@example.com" });
    const deleted = await endedWhileWaiting(owner.accountId, sessionOf(owner.token), () => h.gql(`mutation { deleteAccount { __typename } }`, {}, bearer(owner.token)));
    expect(deleted.body.errors?.[0]?.extensions?.code, JSON.stringify(deleted.body)).toBe("UNAUTHENTICATED");
    expect(await h.db.prisma.account.count({ where: { id: owner.accountId } })).toBe(1);
  });

  it("a removal of an address, or of a passkey, whose session ended removes nothing", async () => {
    const owner = await h.signIn({ email: "ended.remove@example.com" });
    const req = await h.call("POST", "/users/link/request", { body: { email: "ended.second@example.com" }, headers: bearer(owner.token) });
    await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp: await h.mailbox.otp("ended.second@example.com") }, headers: bearer(owner.token) });
    const removed = await endedWhileWaiting(owner.accountId, sessionOf(owner.token), () =>
      h.call("POST", "/users/link/remove", { body: { email: "ended.remove@example.com" }, headers: bearer(owner.token) }),
    );
    expect(removed.status, JSON.stringify(removed.body)).toBe(401);
    expect(await h.db.prisma.identifier.count({ where: { accountId: owner.accountId } })).toBe(2);

    const again = await h.signIn({ email: "ended.remove@example.com" });
    const key = new SoftAuthenticator(PASSKEY_ORIGIN);
    const opts = await h.gql(`mutation { startPasskeyRegistration { ... on PasskeyCreationOptions { options } } }`, {}, bearer(again.token));
    const registered = await h.gql(`mutation($r: JSON!) { finishPasskeyRegistration(response: $r) { ... on Passkey { id } } }`, { r: key.create(opts.body.data.startPasskeyRegistration.options) }, bearer(again.token));
    const passkeyId = registered.body.data.finishPasskeyRegistration.id;
    const gone = await endedWhileWaiting(owner.accountId, sessionOf(again.token), () =>
      h.gql(`mutation($id: ID!) { removePasskey(id: $id) { __typename } }`, { id: passkeyId }, bearer(again.token)),
    );
    expect(gone.body.errors?.[0]?.extensions?.code, JSON.stringify(gone.body)).toBe("UNAUTHENTICATED");
    expect(await h.db.prisma.passkey.count({ where: { id: passkeyId } })).toBe(1);
  });

  // A passkey's rename wrote with no look at its session at all: one ended while the request was
  // under way (the owner removing the intruder's address, which ends his sessions) still renamed
  // the owner's passkey. The passkey's row is held too: the rename waited for that alone.
  it("a passkey rename whose session ended renames nothing: UNAUTHENTICATED", async () => {
    const owner = await h.signIn({ email: "ended.passkey-rename@example.com" });
    const key = new SoftAuthenticator(PASSKEY_ORIGIN);
    const passkeyId = await registerPasskey(h, owner.token, key);
    const before = (await h.db.prisma.passkey.findUniqueOrThrow({ where: { id: passkeyId } })).name;
    await blocker.query("BEGIN");
    await blocker.query("SELECT id FROM passkeys WHERE id = $1 FOR UPDATE", [passkeyId]);
    const renamed = await endedWhileWaiting(owner.accountId, sessionOf(owner.token), () =>
      h.gql(`mutation($id: ID!) { renamePasskey(id: $id, name: "Renamed late") { __typename } }`, { id: passkeyId }, bearer(owner.token)),
    );
    expect(renamed.body.errors?.[0]?.extensions?.code, JSON.stringify(renamed.body)).toBe("UNAUTHENTICATED");
    expect((await h.db.prisma.passkey.findUniqueOrThrow({ where: { id: passkeyId } })).name).toBe(before);
  });

  // A re-authentication is a write with the session too: it moved the auth_time of a session
  // ended while the assertion was checked (a sign-out, "end other sessions" on the owner's other
  // device) and answered fresh tokens for it, as if it still lived.
  it("a passkey re-authentication whose session ended re-authenticates nothing: UNAUTHENTICATED, not tokens", async () => {
    const owner = await h.signIn({ email: "ended.reauth@example.com" });
    const key = new SoftAuthenticator(PASSKEY_ORIGIN);
    await registerPasskey(h, owner.token, key);
    const sessionId = sessionOf(owner.token);
    const before = await h.db.prisma.session.findUniqueOrThrow({ where: { id: sessionId } });
    const assertion = await passkeyAssertion(h, key);
    const reauth = await endedWhileWaiting(owner.accountId, sessionId, () =>
      h.gql(`mutation($r: JSON!) { reauthenticateWithPasskey(response: $r) { __typename ... on SignInTokens { accessToken } } }`, { r: assertion }, bearer(owner.token)),
    );
    expect(reauth.body.errors?.[0]?.extensions?.code, JSON.stringify(reauth.body)).toBe("UNAUTHENTICATED");
    const after = await h.db.prisma.session.findUniqueOrThrow({ where: { id: sessionId } });
    expect({ authTime: after.authTime, reauthenticatedWith: after.reauthenticatedWith }).toEqual({ authTime: before.authTime, reauthenticatedWith: before.reauthenticatedWith });
  });
});
