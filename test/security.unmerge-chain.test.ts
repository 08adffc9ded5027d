// The chain an unmerge follows is bounded, and followed whole however long it is (docs/security.md,
// "Sessions"). Whoever holds a merged secondary's address can sign in to the primary with it,
// register a passkey there, sign in with that passkey, register the next, and so on: each passkey
// is proven through the one before, and all of them go back to the secondary on unmerge. That
// took no mailbox, and nothing capped the passkeys of an account, so the chain was as long as the
// intruder liked; the unmerge, the removal of an identifier and every `viewer` request followed it
// with two queries per passkey (27th and 28th reviews).
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PASSKEYS_PER_ACCOUNT } from "../src/auth/passkeys.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { backends } from "./support/db.ts";
import { PASSKEY_ORIGIN, registerPasskey, signInWithPasskey } from "./support/passkeys.ts";

const tag = `c${randomBytes(3).toString("hex")}`;
let seq = 0;
const email = (name: string) => `${name}-${tag}-${++seq}@example.com`;
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe.each(backends)("the passkeys an unmerge follows, on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  /** `primary` links `address`, the own address of another account, with the code sent there. */
  async function merge(primary: { token: string }, address: string): Promise<void> {
    const req = await h.call("POST", "/users/link/request", { body: { email: address }, headers: bearer(primary.token) });
    expect(req.status, JSON.stringify(req.body)).toBe(200);
    const verify = await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp: await h.mailbox.otp(address) }, headers: bearer(primary.token) });
    expect(verify.body).toMatchObject({ outcome: "merged" });
  }

  /** Registers `n` passkeys on the account `token` signs in to, each from a session signed in with the one before. */
  async function chainOfPasskeys(token: string, auth: SoftAuthenticator, n: number): Promise<string[]> {
    const ids: string[] = [];
    for (let session = token; ids.length < n; session = await signInWithPasskey(h, auth)) {
      ids.push(await registerPasskey(h, session, auth));
    }
    return ids;
  }

  it("gives back a chain as long as the account's passkeys can be, each proven through the one before", async () => {
    const secondaryMail = email("second");
    const secondary = await h.signIn({ email: secondaryMail });
    const primary = await h.signIn({ email: email("first") });
    await merge(primary, secondaryMail);
    const intruder = await h.signIn({ email: secondaryMail });
    expect(intruder.accountId).toBe(primary.accountId);

    const auth = new SoftAuthenticator(PASSKEY_ORIGIN);
    const chain = await chainOfPasskeys(intruder.token, auth, PASSKEYS_PER_ACCOUNT);
    const held = await h.db.prisma.passkey.findMany({ where: { id: { in: chain } }, select: { accountId: true } });
    expect(held.map((p) => p.accountId)).toEqual(chain.map(() => primary.accountId));

    const unmerged = await h.call("POST", "/users/link/unmerge", { body: {}, headers: bearer(primary.token) });
    expect(unmerged.status, JSON.stringify(unmerged.body)).toBe(200);
    const after = await h.db.prisma.passkey.findMany({ where: { id: { in: chain } }, select: { accountId: true } });
    expect(after.map((p) => p.accountId)).toEqual(chain.map(() => secondary.accountId));
    // the last of the chain signs in to the secondary now, and nothing of it is left on the primary
    const last = await signInWithPasskey(h, auth);
    expect((await h.gql("{ viewer { id } }", {}, bearer(last))).body.data.viewer.id).toBe(secondary.accountId);
    expect(await h.db.prisma.passkey.count({ where: { accountId: primary.accountId } })).toBe(0);
  });

  it(`refuses an account's passkey past ${PASSKEYS_PER_ACCOUNT} with InvalidRequest, and takes it once one is removed`, async () => {
    const owner = await h.signIn({ email: email("many") });
    const auth = new SoftAuthenticator(PASSKEY_ORIGIN);
    const ids: string[] = [];
    while (ids.length < PASSKEYS_PER_ACCOUNT) ids.push(await registerPasskey(h, owner.token, auth));

    const headers = { ...bearer(owner.token), "x-api-key": h.publishableKey };
    const opts = await h.call("POST", "/auth/passkey/registration/options", { headers });
    expect(opts.status, JSON.stringify(opts.body)).toBe(200);
    const refused = await h.call("POST", "/auth/passkey/registration/verify", { body: { response: auth.create(opts.body) }, headers });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ error: "InvalidRequest", message: expect.stringContaining(`at most ${PASSKEYS_PER_ACCOUNT} passkeys`) });
    expect(await h.db.prisma.passkey.count({ where: { accountId: owner.accountId } })).toBe(PASSKEYS_PER_ACCOUNT);

    const removed = await h.call("POST", "/auth/passkey/remove", { body: { id: ids[0] }, headers });
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    ids.push(await registerPasskey(h, owner.token, auth));
    expect(await h.db.prisma.passkey.count({ where: { accountId: owner.accountId } })).toBe(PASSKEYS_PER_ACCOUNT);
  });
});
