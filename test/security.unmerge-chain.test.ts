// The chain an unmerge follows is bounded, and followed whole however long it is (docs/security.md,
// "Sessions"). Whoever holds a merged secondary's address can sign in to the primary with it,
// register a passkey there, sign in with that passkey, register the next, and so on: each passkey
// is proven through the one before, and the unmerge removes all of them from the primary. That
// took no mailbox, and nothing capped the passkeys of an account, so the chain was as long as the
// intruder liked; the unmerge, the removal of an identifier and every `viewer` request followed it
// with two queries per passkey (27th and 28th reviews).
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PASSKEYS_PER_ACCOUNT } from "../src/auth/passkeys.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { backends } from "./support/db.ts";
import { PASSKEY_ORIGIN, passkeyAssertion, registerPasskey, signInWithPasskey } from "./support/passkeys.ts";

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

  it("removes a chain as long as the account's passkeys can be, each proven through the one before, and leaves the owner's own", async () => {
    const secondaryMail = email("second");
    const secondary = await h.signIn({ email: secondaryMail });
    const primary = await h.signIn({ email: email("first") });
    const owners = new SoftAuthenticator(PASSKEY_ORIGIN);
    const own = await registerPasskey(h, primary.token, owners);
    await merge(primary, secondaryMail);
    const intruder = await h.signIn({ email: secondaryMail });
    expect(intruder.accountId).toBe(primary.accountId);

    const auth = new SoftAuthenticator(PASSKEY_ORIGIN);
    const chain = await chainOfPasskeys(intruder.token, auth, PASSKEYS_PER_ACCOUNT - 1);
    const holders = async (ids: string[]) => (await h.db.prisma.passkey.findMany({ where: { id: { in: ids } }, select: { accountId: true } })).map((p) => p.accountId);
    expect(await holders(chain)).toEqual(chain.map(() => primary.accountId));

    const unmerged = await h.call("POST", "/users/link/unmerge", { body: {}, headers: bearer(primary.token) });
    expect(unmerged.status, JSON.stringify(unmerged.body)).toBe(200);
    expect(await holders(chain)).toEqual([]);
    expect(await holders([own])).toEqual([primary.accountId]);
    expect(await h.db.prisma.passkey.count({ where: { accountId: secondary.accountId } })).toBe(0);
    // the last of the chain signs in nowhere now, the owner's passkey to her own account
    const lastOfChain = await h.gql(`mutation($r: JSON!) { finishPasskeySignIn(response: $r) { __typename } }`, { r: await passkeyAssertion(h, auth) }, { "x-api-key": h.publishableKey });
    expect(lastOfChain.body.data.finishPasskeySignIn.__typename).toBe("PasskeyInvalid");
    expect((await h.gql("{ viewer { id } }", {}, bearer(await signInWithPasskey(h, owners)))).body.data.viewer.id).toBe(primary.accountId);
  });

  it(`refuses registering past ${PASSKEYS_PER_ACCOUNT} passkeys with InvalidRequest, before any authenticator stores one, and takes one again once fewer are held`, async () => {
    const owner = await h.signIn({ email: email("many") });
    const headers = { ...bearer(owner.token), "x-api-key": h.publishableKey };
    const auth = new SoftAuthenticator(PASSKEY_ORIGIN);
    const ids: string[] = [];
    while (ids.length < PASSKEYS_PER_ACCOUNT - 1) ids.push(await registerPasskey(h, owner.token, auth));

    // the last place taken by two ceremonies at once: one of them gets it
    const options = await Promise.all([0, 1].map(() => h.call("POST", "/auth/passkey/registration/options", { headers })));
    for (const o of options) expect(o.status, JSON.stringify(o.body)).toBe(200);
    const finished = await Promise.all(options.map((o) => h.call("POST", "/auth/passkey/registration/verify", { body: { response: auth.create(o.body) }, headers })));
    expect(finished.map((f) => f.status).sort()).toEqual([200, 400]);
    expect(finished.find((f) => f.status === 400)!.body).toMatchObject({ error: "InvalidRequest", message: expect.stringContaining(`at most ${PASSKEYS_PER_ACCOUNT} passkeys`) });
    ids.push(finished.find((f) => f.status === 200)!.body.passkey.id);
    expect(await h.db.prisma.passkey.count({ where: { accountId: owner.accountId } })).toBe(PASSKEYS_PER_ACCOUNT);

    const refused = await h.call("POST", "/auth/passkey/registration/options", { headers });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ error: "InvalidRequest", message: expect.stringContaining(`at most ${PASSKEYS_PER_ACCOUNT} passkeys`) });
    const viaGraphql = await h.gql(`mutation { startPasskeyRegistration { __typename ... on InvalidRequest { message } } }`, {}, headers);
    expect(viaGraphql.body.data.startPasskeyRegistration.__typename).toBe("InvalidRequest");

    const removed = await h.call("POST", "/auth/passkey/remove", { body: { id: ids[0] }, headers });
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    ids.push(await registerPasskey(h, owner.token, auth));
    expect(await h.db.prisma.passkey.count({ where: { accountId: owner.accountId } })).toBe(PASSKEYS_PER_ACCOUNT);
  });
});
