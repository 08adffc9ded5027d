// An unmerge gives the secondary back exactly as it was (docs/security.md, "Sessions"): what was
// added on the primary by way of the secondary is removed, not handed to it, and no session stays
// on an account it holds no proof for. Seventeenth review: an external sign-in confirmed with the
// code to a merged secondary's e-mail was attached to the primary and stayed there after the unmerge (the secondary's owner's
// Google sign-in kept landing in the other person's account); and the session that made the
// unmerge was always kept, even when it had signed in with the secondary's address, so an
// intruder who unmerged kept his session on the owner's account. Twentieth review, of the first
// fix (the identity attached to the secondary itself): removing it then unmerged the two instead.
// 24th and 26th reviews: passkeys registered and addresses attached by way of the secondary.
// Then those were handed to the secondary, which came back with identifiers it never had, where
// the unmerge promises it exactly as it was.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { waitingForLock } from "./support/locks.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { ORIGIN } from "./support/oidc.ts";
import { passkeyAssertion, registerPasskey, signInWithPasskey } from "./support/passkeys.ts";
import { authorize, complete, confirm, externalSignIn, externalValue, externalWorldFor, type Res } from "./support/upstream-linkgate.ts";

const tag = `t${randomBytes(3).toString("hex")}`;
let seq = 0;
const email = (name: string) => `${name}-${tag}-${++seq}@example.com`;

describe.each(backends)("an unmerge restores the secondary exactly, on %s", (backend) => {
  const { h, google, app } = externalWorldFor(backend, "https://app.example/after-sign-in");

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const viewerOf = async (token: string) => (await h.gql("{ viewer { id } }", {}, bearer(token))).body.data?.viewer?.id ?? null;
  const accountOf = (r: Res) => {
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body.account_id as string;
  };

  /** `primary` links `secondary`'s own address with the code sent there: a merge. */
  async function merge(primary: { token: string }, address: string): Promise<void> {
    const req = await h.call("POST", "/users/link/request", { body: { email: address }, headers: bearer(primary.token) });
    expect(req.status, JSON.stringify(req.body)).toBe(200);
    const verify = await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp: await h.mailbox.otp(address) }, headers: bearer(primary.token) });
    expect(verify.body).toMatchObject({ outcome: "merged" });
  }

  /**
   * A secondary merged into a primary, and a session signed in with the secondary's address,
   * which lands on the primary: its holder, whom the unmerge must leave nothing of theirs there.
   */
  async function mergedWithIntruder() {
    const secondaryMail = email("second");
    const secondary = await h.signIn({ email: secondaryMail });
    const ownMail = email("first");
    const primary = await h.signIn({ email: ownMail });
    await merge(primary, secondaryMail);
    const viaSecondary = await h.signIn({ email: secondaryMail });
    return { secondaryMail, secondary, ownMail, primary, viaSecondary };
  }

  /** The account signed in with `token` attaches `address`, nobody's yet, with the code sent there. */
  async function attach(token: string, address: string): Promise<void> {
    const req = await h.call("POST", "/users/link/request", { body: { email: address }, headers: bearer(token) });
    expect(req.status, JSON.stringify(req.body)).toBe(200);
    const verify = await h.call("POST", "/users/link/verify", { body: { state_id: req.body.state_id, otp: await h.mailbox.otp(address) }, headers: bearer(token) });
    expect(verify.body).toMatchObject({ outcome: "attached" });
  }

  type Grace = { sub: string; email: string; email_verified: boolean; name: string };

  /** `grace` signs in with Google, which names `address`: she proves it with its code, and lands on `accountId`. */
  async function confirmGoogle(grace: Grace, address: string, accountId: string) {
    google.loginAs(grace);
    const { started, code } = await authorize(h, google, "google", app.redirectUri);
    const asked = await complete(h, started.state_id, code);
    expect(asked.body.verification_required, JSON.stringify(asked.body)).toBe("email");
    const confirmed = await confirm(h, asked.body.state_id, await h.mailbox.otp(address));
    expect(accountOf(confirmed)).toBe(accountId);
    return confirmed.body.access_token as string;
  }

  /**
   * The secondary's owner signs in with her Google account, which names her address (or one that
   * signs into the primary): she proves the address with its code, and lands on the primary.
   */
  async function googleThroughSecondary(secondaryMail: string, primaryId: string) {
    const grace = { sub: `g-${tag}-${++seq}`, email: secondaryMail, email_verified: true, name: "Grace" };
    const token = await confirmGoogle(grace, secondaryMail, primaryId);
    return { grace, value: externalValue(google, grace.sub), token };
  }

  /** The account's identifiers, its name and its passkeys, as an unmerge must give them back. */
  const asItIs = async (accountId: string) => ({
    identifiers: (await h.db.prisma.identifier.findMany({ where: { accountId }, select: { id: true, kind: true, value: true, origin: true } })).sort((a, b) => a.id.localeCompare(b.id)),
    name: (await h.db.prisma.account.findUniqueOrThrow({ where: { id: accountId } })).name,
    passkeys: (await h.db.prisma.passkey.findMany({ where: { accountId }, select: { id: true } })).map((p) => p.id).sort(),
  });

  /** A passkey sign-in's answer: its type, and the account it signed into. */
  async function passkeySignIn(auth: SoftAuthenticator): Promise<string> {
    const r = await h.gql(
      `mutation($r: JSON!) { finishPasskeySignIn(response: $r) { __typename ... on SignInTokens { accessToken } } }`,
      { r: await passkeyAssertion(h, auth) },
      { "x-api-key": h.publishableKey },
    );
    const result = r.body.data.finishPasskeySignIn;
    return result.__typename === "SignInTokens" ? await viewerOf(result.accessToken) : result.__typename;
  }
  const holderOf = async (value: string) => (await h.db.prisma.identifier.findFirst({ where: { kind: "external", value } }))?.accountId ?? null;

  it("an external sign-in confirmed through the secondary's e-mail is removed; signing in with it asks for the code again and lands on the secondary", async () => {
    const secondaryMail = email("second");
    const secondary = await h.signIn({ email: secondaryMail });
    const before = await asItIs(secondary.accountId);
    const primary = await h.signIn({ email: email("first") });
    await merge(primary, secondaryMail);
    const { grace, value } = await googleThroughSecondary(secondaryMail, primary.accountId);
    expect(await holderOf(value)).toBe(primary.accountId);

    const unmerged = await h.call("POST", "/users/link/unmerge", { body: {}, headers: bearer(primary.token) });
    expect(unmerged.status, JSON.stringify(unmerged.body)).toBe(200);
    expect(await holderOf(value)).toBeNull();
    expect(await asItIs(secondary.accountId)).toEqual(before);
    await confirmGoogle(grace, secondaryMail, secondary.accountId);
    google.loginAs(grace);
    expect(accountOf(await externalSignIn(h, google, "google", app.redirectUri))).toBe(secondary.accountId);
  });

  it("says which sign-in leaves on unmerge, never lets it be the account's last, and announces it leaving", async () => {
    const secondaryMail = email("second");
    await h.signIn({ email: secondaryMail });
    const ownMail = email("first");
    const primary = await h.signIn({ email: ownMail });
    await merge(primary, secondaryMail);
    const { value } = await googleThroughSecondary(secondaryMail, primary.accountId);
    const viewer = await h.gql("{ viewer { identifiers { value leavesOnUnmerge } } }", {}, bearer(primary.token));
    expect(viewer.body.data.viewer.identifiers).toEqual(
      expect.arrayContaining([
        { value: ownMail, leavesOnUnmerge: false },
        { value, leavesOnUnmerge: true },
      ]),
    );

    // the primary's own address is its last way in that stays: removing it would leave the
    // account with none once the unmerge took the Google sign-in away (21st review)
    const removed = await h.call("POST", "/users/link/remove", { body: { email: ownMail }, headers: bearer(primary.token) });
    expect(removed.status, JSON.stringify(removed.body)).toBe(409);
    expect(removed.body.error).toBe("LastIdentifier");

    const before = (await h.db.prisma.outboxEvent.findFirst({ orderBy: { seq: "desc" } }))?.seq ?? 0n;
    expect((await h.call("POST", "/users/link/unmerge", { body: {}, headers: bearer(primary.token) })).status).toBe(200);
    const events = await h.db.prisma.outboxEvent.findMany({ where: { seq: { gt: before } }, orderBy: { seq: "asc" } });
    const unlinked = events.filter((e) => e.eventType === "user.identifier.unlinked").map((e) => JSON.parse(e.body).data);
    expect(unlinked, JSON.stringify(unlinked)).toEqual([expect.objectContaining({ identifier: { type: "external", value }, user: expect.objectContaining({ user_id: primary.accountId }) })]);
    expect(await holderOf(value)).toBeNull();
  });

  it("that sign-in can be removed while merged, and the two stay merged", async () => {
    const secondaryMail = email("second");
    await h.signIn({ email: secondaryMail });
    const primary = await h.signIn({ email: email("first") });
    await merge(primary, secondaryMail);
    const { value } = await googleThroughSecondary(secondaryMail, primary.accountId);

    const removed = await h.call("POST", "/users/link/remove", { body: { external: value }, headers: bearer(primary.token) });
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    expect(await holderOf(value)).toBeNull();
    expect((await h.db.prisma.account.findUniqueOrThrow({ where: { id: primary.accountId } })).mergeRole).toBe("primary");
  });

  it("the session that unmerges ends too when it signed in with the secondary's address", async () => {
    const secondaryMail = email("second");
    await h.signIn({ email: secondaryMail });
    const owner = await h.signIn({ email: email("owner") });
    await merge(owner, secondaryMail);
    // whoever holds the secondary's address signs in (landing on the owner's account) and unmerges
    const intruder = await h.signIn({ email: secondaryMail });
    expect(await viewerOf(intruder.token)).toBe(owner.accountId);

    const unmerged = await h.gql("mutation { unmerge { __typename } }", {}, bearer(intruder.token));
    expect(unmerged.body.data.unmerge.__typename).toBe("MessagePayload");
    expect(await viewerOf(intruder.token)).toBeNull();
    expect(await viewerOf(owner.token)).toBe(owner.accountId);
  });

  // 24th review: whoever held the secondary's address signed in (landing on the primary),
  // registered a passkey there, and kept a way into the primary after the unmerge
  it("a passkey registered by a session signed in with the secondary's address is removed; the primary's own stays", async () => {
    const { secondary, primary, viaSecondary } = await mergedWithIntruder();
    const before = await asItIs(secondary.accountId);
    expect(viaSecondary.accountId).toBe(primary.accountId);
    // this world's gateway is its issuer's origin, and so is its passkeys' relying party
    const theirs = new SoftAuthenticator(ORIGIN);
    const mine = new SoftAuthenticator(ORIGIN);
    const theirId = await registerPasskey(h, viaSecondary.token, theirs);
    const myId = await registerPasskey(h, primary.token, mine);

    expect((await h.call("POST", "/users/link/unmerge", { body: {}, headers: bearer(primary.token) })).status).toBe(200);
    const owners = await h.db.prisma.passkey.findMany({ where: { id: { in: [theirId, myId] } }, select: { id: true, accountId: true } });
    expect(Object.fromEntries(owners.map((p) => [p.id, p.accountId]))).toEqual({ [myId]: primary.accountId });
    expect(await asItIs(secondary.accountId)).toEqual(before);
    expect(await passkeySignIn(theirs)).toBe("PasskeyInvalid");
    expect(await passkeySignIn(mine)).toBe(primary.accountId);
  });

  // 33rd review: the unmerge removed such a passkey and said nothing of it. Its events named
  // every identifier that left the primary but no passkey, so a receiver that keeps the
  // account's passkeys from user.passkey.registered and passkey_removed kept it for good.
  it("each passkey the unmerge removes is announced as a removed passkey is, to the webhooks", async () => {
    const { primary, viaSecondary } = await mergedWithIntruder();
    const theirs = new SoftAuthenticator(ORIGIN);
    const theirIds = [await registerPasskey(h, viaSecondary.token, theirs), await registerPasskey(h, viaSecondary.token, theirs)];
    const myId = await registerPasskey(h, primary.token, new SoftAuthenticator(ORIGIN));

    const before = (await h.db.prisma.outboxEvent.findFirst({ orderBy: { seq: "desc" } }))?.seq ?? 0n;
    const unmerged = await h.gql("mutation { unmerge { __typename } }", {}, bearer(primary.token));
    expect(unmerged.body.data.unmerge.__typename).toBe("MessagePayload");
    const events = (await h.db.prisma.outboxEvent.findMany({ where: { seq: { gt: before } }, orderBy: { seq: "asc" } })).map((e) => ({
      type: e.eventType,
      data: JSON.parse(e.body).data,
    }));
    expect(events.map((e) => e.type)).toEqual(["user.unmerged", "user.updated", "user.updated", "user.updated"]);
    const removed = events.flatMap((e) => (e.data.passkey_removed ? [e.data.passkey_removed.id] : []));
    expect(removed.sort()).toEqual([...theirIds].sort());
    expect(removed).not.toContain(myId);
    for (const e of events) expect(e.data.user.user_id).toBe(primary.accountId);
  });

  // 26th review: the passkey's give-back was dodged by attaching an address first (the session
  // signed in with the secondary's address) and registering the passkey from a session signed in
  // with that address: both stayed on the primary after the unmerge
  it("an address attached by way of the secondary's is removed, with what was proven through that address", async () => {
    const { secondary, ownMail, primary, viaSecondary } = await mergedWithIntruder();
    const asItWas = await asItIs(secondary.accountId);
    const theirMail = email("theirs");
    await attach(viaSecondary.token, theirMail);
    const viaTheirs = await h.signIn({ email: theirMail });
    expect(viaTheirs.accountId).toBe(primary.accountId);
    const theirs = new SoftAuthenticator(ORIGIN);
    const theirPasskey = await registerPasskey(h, viaTheirs.token, theirs);

    const viewer = await h.gql("{ viewer { identifiers { value leavesOnUnmerge } } }", {}, bearer(primary.token));
    expect(viewer.body.data.viewer.identifiers).toEqual(
      expect.arrayContaining([
        { value: ownMail, leavesOnUnmerge: false },
        { value: theirMail, leavesOnUnmerge: true },
      ]),
    );
    // it is not the account's own way in: the owner's last address cannot go on its strength
    const removed = await h.call("POST", "/users/link/remove", { body: { email: ownMail }, headers: bearer(primary.token) });
    expect(removed.status, JSON.stringify(removed.body)).toBe(409);
    expect(removed.body.error).toBe("LastIdentifier");
    // an address the owner attaches from her own session stays hers
    const myMail = email("mine");
    await attach(primary.token, myMail);

    const before = (await h.db.prisma.outboxEvent.findFirst({ orderBy: { seq: "desc" } }))?.seq ?? 0n;
    expect((await h.call("POST", "/users/link/unmerge", { body: {}, headers: bearer(primary.token) })).status).toBe(200);
    const holders = await h.db.prisma.identifier.findMany({ where: { value: { in: [theirMail, myMail] } }, select: { value: true, accountId: true } });
    expect(Object.fromEntries(holders.map((i) => [i.value, i.accountId]))).toEqual({ [myMail]: primary.accountId });
    expect(await h.db.prisma.passkey.findUnique({ where: { id: theirPasskey } })).toBeNull();
    expect(await asItIs(secondary.accountId)).toEqual(asItWas);
    expect(await viewerOf(viaTheirs.token)).toBeNull();
    expect(await passkeySignIn(theirs)).toBe("PasskeyInvalid");
    // nobody's now: a sign-in with it starts an account of its own
    expect([primary.accountId, secondary.accountId]).not.toContain((await h.signIn({ email: theirMail })).accountId);
    const events = await h.db.prisma.outboxEvent.findMany({ where: { seq: { gt: before }, eventType: "user.identifier.unlinked" } });
    expect(events.map((e) => JSON.parse(e.body).data.identifier)).toEqual([{ type: "email", value: theirMail }]);
    // the removed address is told, as the secondary's are: without where the unmerge came from
    const told = await h.db.prisma.notice.findMany({ where: { kind: "email", value: theirMail, subject: { contains: "separated" } } });
    expect(told.map((n) => n.text.includes("From: ")), JSON.stringify(told)).toEqual([false]);
  });

  /**
   * The end of a chain that began with the secondary's address (`end`, attached; `theirPasskey`)
   * is not the owner's: her own last address cannot be removed, and the unmerge removes both.
   */
  async function expectChainRemoved(a: { ownMail: string; primary: { token: string }; end: string; theirPasskey: string }) {
    const removed = await h.call("POST", "/users/link/remove", { body: { email: a.ownMail }, headers: bearer(a.primary.token) });
    expect(removed.status, JSON.stringify(removed.body)).toBe(409);
    expect((await h.call("POST", "/users/link/unmerge", { body: {}, headers: bearer(a.primary.token) })).status).toBe(200);
    expect(await h.db.prisma.identifier.findFirst({ where: { kind: "email", value: a.end } })).toBeNull();
    expect(await h.db.prisma.passkey.findUnique({ where: { id: a.theirPasskey } })).toBeNull();
  }

  // 27th review: removing a middle link of the chain (the address attached by way of the
  // secondary's) cut what hung from it loose, and it stayed on the primary as the owner's own
  it("removing an address the chain passes through keeps what hangs from it on the chain", async () => {
    const { secondary, ownMail, primary, viaSecondary } = await mergedWithIntruder();
    const middle = email("middle");
    await attach(viaSecondary.token, middle);
    const viaMiddle = await h.signIn({ email: middle });
    const end = email("end");
    await attach(viaMiddle.token, end);
    const theirs = new SoftAuthenticator(ORIGIN);
    const theirPasskey = await registerPasskey(h, viaMiddle.token, theirs);
    const removedMiddle = await h.call("POST", "/users/link/remove", { body: { email: middle }, headers: bearer(viaSecondary.token) });
    expect(removedMiddle.status, JSON.stringify(removedMiddle.body)).toBe(200);

    await expectChainRemoved({ ownMail, primary, end, theirPasskey });
  });

  // 27th review, second look: the session that removed the middle link was kept, still naming
  // it, so what it added next matched nothing and counted as the owner's own
  it("what the session that removed a link adds next stays on the chain", async () => {
    const { secondary, ownMail, primary, viaSecondary } = await mergedWithIntruder();
    const middle = email("middle");
    await attach(viaSecondary.token, middle);
    const viaMiddle = await h.signIn({ email: middle });
    const removedMiddle = await h.call("POST", "/users/link/remove", { body: { email: middle }, headers: bearer(viaMiddle.token) });
    expect(removedMiddle.status, JSON.stringify(removedMiddle.body)).toBe(200);
    const end = email("end");
    await attach(viaMiddle.token, end);
    const theirs = new SoftAuthenticator(ORIGIN);
    const theirPasskey = await registerPasskey(h, viaMiddle.token, theirs);

    await expectChainRemoved({ ownMail, primary, end, theirPasskey });
    expect(await viewerOf(viaMiddle.token)).toBeNull();
  });

  // 27th review: an external sign-in confirmed with the code of an address attached by way of
  // the secondary's remembered nothing, and stayed on the primary
  it("an external sign-in confirmed through an address attached by way of the secondary's is removed with it", async () => {
    const { secondary, primary, viaSecondary } = await mergedWithIntruder();
    const before = await asItIs(secondary.accountId);
    const theirMail = email("theirs");
    await attach(viaSecondary.token, theirMail);
    const { value } = await googleThroughSecondary(theirMail, primary.accountId);

    expect((await h.call("POST", "/users/link/unmerge", { body: {}, headers: bearer(primary.token) })).status).toBe(200);
    expect(await holderOf(value)).toBeNull();
    expect(await h.db.prisma.identifier.findFirst({ where: { kind: "email", value: theirMail } })).toBeNull();
    expect(await asItIs(secondary.accountId)).toEqual(before);
  });

  // 24th review: a sign-in with that identity racing the unmerge read the identity's account
  // before the account's lock and never again, so it opened a session on the primary, signed in
  // with an identity the unmerge had just taken away, which nothing would end. Postgres only: a
  // second connection holds the primary's lock while the sign-in comes to wait for it, and makes
  // the unmerge's changes meanwhile.
  it.runIf(backend === "postgres")("a sign-in with that identity racing the unmerge is decided again, never on the primary", async () => {
    const secondaryMail = email("second");
    const secondary = await h.signIn({ email: secondaryMail });
    const primary = await h.signIn({ email: email("first") });
    await merge(primary, secondaryMail);
    const { grace, value } = await googleThroughSecondary(secondaryMail, primary.accountId);
    const identity = await h.db.prisma.identifier.findFirstOrThrow({ where: { kind: "external", value } });

    const blocker = new pg.Client({ connectionString: h.db.url });
    await blocker.connect();
    try {
      google.loginAs(grace);
      const { started, code } = await authorize(h, google, "google", app.redirectUri);
      await blocker.query("BEGIN");
      await blocker.query("SELECT id FROM accounts WHERE id = $1 FOR UPDATE", [primary.accountId]);
      const signIn = complete(h, started.state_id, code);
      await waitingForLock(blocker);
      // what the unmerge does to this pair, committed while the sign-in waits
      await blocker.query("UPDATE sessions SET ended_at = now() WHERE account_id = $1 AND signed_in_with = $2", [primary.accountId, identity.id]);
      await blocker.query("DELETE FROM identifiers WHERE id = $1", [identity.id]);
      await blocker.query("UPDATE accounts SET merged_with_id = NULL, merge_role = NULL, merged_at = NULL WHERE id = ANY($1)", [[primary.accountId, secondary.accountId]]);
      await blocker.query("COMMIT");
      // an identity nobody holds, naming the secondary's address: its code is asked for again
      const decided = await signIn;
      expect(decided.body.verification_required, JSON.stringify(decided.body)).toBe("email");
    } finally {
      await blocker.end();
    }
    expect(await h.db.prisma.session.count({ where: { accountId: primary.accountId, signedInWith: identity.id, endedAt: null } })).toBe(0);
  });

  // 30th review: a passkey sign-in read its passkey on the primary before the unmerge took it
  // away, waited for the primary's lock, and opened a session there that nothing would end.
  // Postgres only, as above.
  it.runIf(backend === "postgres")("a sign-in with a passkey the racing unmerge removes signs nothing in", async () => {
    const { secondary, primary, viaSecondary } = await mergedWithIntruder();
    const theirs = new SoftAuthenticator(ORIGIN);
    const passkeyId = await registerPasskey(h, viaSecondary.token, theirs);

    const blocker = new pg.Client({ connectionString: h.db.url });
    await blocker.connect();
    try {
      await blocker.query("BEGIN");
      await blocker.query("SELECT id FROM accounts WHERE id = $1 FOR UPDATE", [primary.accountId]);
      const signIn = passkeySignIn(theirs);
      await waitingForLock(blocker);
      // what the unmerge does to this pair, committed while the sign-in waits
      await blocker.query("UPDATE sessions SET ended_at = now() WHERE account_id = $1 AND signed_in_with = $2", [primary.accountId, passkeyId]);
      await blocker.query("DELETE FROM passkeys WHERE id = $1", [passkeyId]);
      await blocker.query("UPDATE accounts SET merged_with_id = NULL, merge_role = NULL, merged_at = NULL WHERE id = ANY($1)", [[primary.accountId, secondary.accountId]]);
      await blocker.query("COMMIT");
      expect(await signIn).toBe("PasskeyInvalid");
    } finally {
      await blocker.end();
    }
    expect(await h.db.prisma.session.count({ where: { accountId: primary.accountId, signedInWith: passkeyId, endedAt: null } })).toBe(0);
  });

  // 27th review, second look: a confirmation waiting for the primary's lock read its address
  // before, and attached the identity proven by an address a removal had just taken away, which
  // then matched nothing on unmerge. Postgres only, as above.
  it.runIf(backend === "postgres")("a confirmation racing the removal of its address does not attach the identity", async () => {
    const { primary, viaSecondary } = await mergedWithIntruder();
    const theirMail = email("theirs");
    await attach(viaSecondary.token, theirMail);
    const grace = { sub: `g-${tag}-${++seq}`, email: theirMail, email_verified: true, name: "Grace" };
    google.loginAs(grace);
    const { started, code } = await authorize(h, google, "google", app.redirectUri);
    const asked = await complete(h, started.state_id, code);
    expect(asked.body.verification_required, JSON.stringify(asked.body)).toBe("email");
    const otp = await h.mailbox.otp(theirMail);

    const blocker = new pg.Client({ connectionString: h.db.url });
    await blocker.connect();
    try {
      await blocker.query("BEGIN");
      await blocker.query("SELECT id FROM accounts WHERE id = $1 FOR UPDATE", [primary.accountId]);
      const confirming = confirm(h, asked.body.state_id, otp);
      await waitingForLock(blocker);
      // what removing the address does to it, committed while the confirmation waits
      await blocker.query("DELETE FROM identifiers WHERE kind = 'email' AND value = $1", [theirMail]);
      await blocker.query("COMMIT");
      const confirmed = await confirming;
      expect([confirmed.status, confirmed.body.error], JSON.stringify(confirmed.body)).toEqual([400, "ExternalSignInFailed"]);
    } finally {
      await blocker.end();
    }
    expect(await holderOf(externalValue(google, grace.sub))).toBeNull();
  });
});
