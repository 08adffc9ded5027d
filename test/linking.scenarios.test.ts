// Identifier linking as a client sees it (docs/rest.md and docs/graphql.md): every row of the verify
// decision table and every error, over REST and over GraphQL, with the database, the outbox
// and the mailbox as witnesses. Every error is checked to change nothing.
import { randomBytes } from "node:crypto";
import { decodeJwt, decodeProtectedHeader, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends, type Backend } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { keptWhileUnwritten } from "./support/db-snapshot.ts";
import { newId } from "../src/ids.ts";

type User = { token: string; accountId: string; idToken: string };
type Ident = { email: string } | { phone: string };
type Res = { status: number; body: any; headers: Headers };

// starts with a letter: the test mailbox reads the first six-digit word of a whole message, headers included
const tag = `t${randomBytes(3).toString("hex")}`;
let seq = 0;
const email = (name = "u") => `${name}-${tag}-${++seq}@example.com`;
let phoneSeq = 0;
/** distinct valid US numbers, written with spaces to show they are normalized */
const phone = () => {
  const n = String(++phoneSeq).padStart(4, "0");
  return `+1 202 555 ${n}`;
};
const e164 = (p: string) => p.replace(/[^\d+]/g, "");
const addr = (i: Ident) => ("email" in i ? i.email.toLowerCase() : e164(i.phone));

const LINKED = { message: "Account linked successfully" };

const GQL = {
  request: `mutation($email: String, $phone: String) { requestLink(email: $email, phone: $phone) {
    __typename ... on OtpChallenge { stateId } ... on Error { message } } }`,
  verify: `mutation($stateId: String!, $otp: String!) { verifyLink(stateId: $stateId, otp: $otp) {
    __typename ... on VerifyLinkPayload { message outcome } ... on Error { message } } }`,
  remove: `mutation($email: String, $phone: String) { removeLink(email: $email, phone: $phone) {
    __typename ... on MessagePayload { message } ... on Error { message } } }`,
  unmerge: `mutation { unmerge { __typename ... on MessagePayload { message } ... on Error { message } } }`,
  viewer: `{ viewer { id mergeRole identifiers { kind value origin } mergedSecondary { id mergeRole identifiers { value } } } }`,
};

/** for the rate-limit describe: two link requests per account and three wrong codes a minute */
const SMALL_LIMITS = { sendsPerAccount: { max: 2, windowSeconds: 60 }, failuresPerSubject: { max: 3, windowSeconds: 60 } };

describe.each(backends)("identifier linking on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const auth = (u: User) => ({ authorization: `Bearer ${u.token}` });
  const post = (u: User | null, route: string, body: unknown, headers: Record<string, string> = {}): Promise<Res> =>
    h.call("POST", `/users/link/${route}`, { body, headers: { ...(u ? auth(u) : {}), ...headers } });
  const gql = async (u: User, query: string, vars: Record<string, unknown> = {}) => {
    const r = await h.gql(query, vars, auth(u));
    expect(r.body.errors).toBeUndefined();
    return Object.values(r.body.data)[0] as any;
  };

  /** request + the code really sent; returns the state id and the code */
  async function challenge(u: User, ident: Ident) {
    const r = await post(u, "request", ident);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(Object.keys(r.body)).toEqual(["state_id"]);
    return { state_id: r.body.state_id as string, otp: await h.mailbox.otp(addr(ident)) };
  }
  const link = async (u: User, ident: Ident) => post(u, "verify", await challenge(u, ident));
  async function linked(u: User, ident: Ident, outcome: "attached" | "merged") {
    const r = await link(u, ident);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({ ...LINKED, outcome });
  }

  /** Every account and identifier, every live session and every user event: what an error must not touch. */
  const snapshotOf = keptWhileUnwritten(async ({ prisma: p }) => ({
    accounts: await p.account.findMany({ orderBy: { id: "asc" } }),
    identifiers: await p.identifier.findMany({ orderBy: { id: "asc" } }),
    liveSessions: await p.session.findMany({ where: { endedAt: null }, orderBy: { id: "asc" }, select: { id: true } }),
    userEvents: await p.outboxEvent.count({ where: { eventType: { startsWith: "user." } } }),
  }));
  const snapshot = () => snapshotOf(h.db);
  async function unchanged<T>(fn: () => Promise<T>): Promise<T> {
    const before = await snapshot();
    const out = await fn();
    expect(await snapshot()).toEqual(before);
    return out;
  }
  async function refused(res: () => Promise<Res>, status: number, error: string) {
    const r = await unchanged(res);
    expect(r.status, JSON.stringify(r.body)).toBe(status);
    expect(r.body).toEqual({ error, message: expect.any(String) });
    expect(r.body.message.length).toBeGreaterThan(0);
    return r;
  }

  const identifiersOf = async (accountId: string) =>
    (await h.db.prisma.identifier.findMany({ where: { accountId }, orderBy: { createdAt: "asc" } })).map((i) => `${i.origin}:${i.value}`);
  const account = (id: string) => h.db.prisma.account.findUniqueOrThrow({ where: { id }, include: { identifiers: { orderBy: { id: "asc" } } } });
  const eventsSince = async (seq: bigint) =>
    (await h.db.prisma.outboxEvent.findMany({ where: { seq: { gt: seq } }, orderBy: { seq: "asc" } })).map((e) => ({
      type: e.eventType,
      data: JSON.parse(e.body).data,
    }));
  const lastSeq = async () => (await h.db.prisma.outboxEvent.findFirst({ orderBy: { seq: "desc" } }))?.seq ?? 0n;
  /** subjects (e-mail) or texts (SMS) of the messages sent to an address or number */
  const sentTo = (to: string) => h.mailbox.messages.filter((m) => m.to === to).map((m) => m.subject ?? m.text);
  /** Notices are sent after the change commits, by the notice sender: wait for one (5 s at most). */
  const noticed = async (to: string, what: RegExp) => {
    for (let i = 0; i < 500 && !sentTo(to).some((t) => what.test(t)); i++) await new Promise((r) => setTimeout(r, 10));
    expect(sentTo(to).some((t) => what.test(t)), `${to}: ${sentTo(to).join(" | ")}`).toBe(true);
  };
  const userinfo = async (u: User) => (await h.call("GET", "/oauth/userinfo", { headers: auth(u) })).body;

  /** a signed-in account of its own (signed up with a phone: texts are quicker than mail), optionally with attached identifiers */
  async function fresh(extra: Ident[] = [], first: Ident = { phone: phone() }) {
    const u = await h.signIn(first);
    for (const i of extra) await linked(u, i, "attached");
    return { ...u, own: first };
  }
  /** the same, signed up with an e-mail */
  const mailUser = (extra: Ident[] = []) => fresh(extra, { email: email() });
  /** a primary merged with a secondary; returns both */
  async function mergedPair() {
    const p = await fresh();
    const s = await fresh();
    await linked(p, s.own, "merged");
    return { p, s };
  }

  describe("verify decides attach or merge", () => {
    it("attaches an unused e-mail and an unused phone (REST); both then sign in to the account", async () => {
      const a = await mailUser();
      const mail = { email: email("Extra").toUpperCase() };
      const tel = { phone: phone() };
      const since = await lastSeq();
      await linked(a, mail, "attached");
      await linked(a, tel, "attached");
      expect(await identifiersOf(a.accountId)).toEqual([`own:${addr(a.own)}`, `attached:${addr(mail)}`, `attached:${e164(tel.phone)}`]);
      expect((await h.signIn(mail)).accountId).toBe(a.accountId);
      expect((await h.signIn({ phone: e164(tel.phone) })).accountId).toBe(a.accountId);

      const events = (await eventsSince(since)).filter((e) => e.type !== "user.authentication.success");
      expect(events.map((e) => e.type)).toEqual(["user.identifier.linked", "user.updated", "user.identifier.linked", "user.updated"]);
      expect(events[0].data).toMatchObject({ user: { user_id: a.accountId }, identifier: { type: "email", value: addr(mail) } });
      expect(events[2].data).toMatchObject({ user: { user_id: a.accountId }, identifier: { type: "phone", value: e164(tel.phone) } });
      // an attached phone is the primary's own phone on file
      expect(await userinfo(a)).toMatchObject({ sub: a.accountId, email: addr(a.own), phone_number: e164(tel.phone) });
    });

    it("attaches over GraphQL with typed results", async () => {
      const a = await mailUser();
      const mail = email();
      const req = await gql(a, GQL.request, { email: mail });
      expect(req).toEqual({ __typename: "OtpChallenge", stateId: expect.stringMatching(/^otp_/) });
      const ver = await gql(a, GQL.verify, { stateId: req.stateId, otp: await h.mailbox.otp(mail) });
      expect(ver).toEqual({ __typename: "VerifyLinkPayload", ...LINKED, outcome: "attached" });
      const tel = phone();
      const req2 = await gql(a, GQL.request, { phone: tel });
      const ver2 = await gql(a, GQL.verify, { stateId: req2.stateId, otp: await h.mailbox.otp(e164(tel)) });
      expect(ver2.outcome).toBe("attached");
      const viewer = await gql(a, GQL.viewer);
      expect(viewer.identifiers.map((i: any) => `${i.kind}:${i.origin}:${i.value}`)).toEqual([
        `email:own:${addr(a.own)}`,
        `email:attached:${mail}`,
        `phone:attached:${e164(tel)}`,
      ]);
    });

    it("merges another account's own identifier: data stays put, the secondary's sessions end, sign-in lands on the primary", async () => {
      const a = await mailUser();
      const bPhone = { phone: phone() };
      const b = await mailUser([bPhone]);
      await h.gql(`mutation { updateProfile(name: "Bea") { __typename } }`, {}, auth(b));
      const bBefore = await account(b.accountId);
      const since = await lastSeq();

      await linked(a, { email: addr(b.own).toUpperCase() }, "merged");

      const [pa, sb] = [await account(a.accountId), await account(b.accountId)];
      expect(pa).toMatchObject({ mergeRole: "primary", mergedWithId: b.accountId, mergedAt: expect.any(Date) });
      expect(sb).toMatchObject({ mergeRole: "secondary", mergedWithId: a.accountId, mergedAt: expect.any(Date) });
      // nothing moved: the secondary keeps its identifiers, name and times
      expect(sb.identifiers).toEqual(bBefore.identifiers);
      expect({ ...sb, mergeRole: null, mergedWithId: null, mergedAt: null }).toEqual(bBefore);
      expect(await identifiersOf(a.accountId)).toEqual([`own:${addr(a.own)}`]);

      // the secondary's old token is dead; its identifiers sign in to the primary
      expect((await h.call("GET", "/oauth/userinfo", { headers: auth(b) })).status).toBe(401);
      expect((await post(b, "unmerge", {})).status).toBe(401);
      const viaB = await h.signIn(b.own);
      expect(viaB.accountId).toBe(a.accountId);
      expect(decodeJwt(viaB.token).sub).toBe(a.accountId);
      const idClaims = decodeJwt(viaB.idToken);
      expect(idClaims).toMatchObject({ sub: a.accountId, email: addr(a.own), email_verified: true });
      // the phone is the secondary's, not the primary's own: no phone_number anywhere
      expect(idClaims.phone_number).toBeUndefined();
      const info = await userinfo(viaB);
      expect(info).toMatchObject({ sub: a.accountId, email: addr(a.own) });
      expect(info.phone_number).toBeUndefined();
      expect((await h.signIn({ phone: e164(bPhone.phone) })).accountId).toBe(a.accountId);

      const events = (await eventsSince(since)).filter((e) => e.type !== "user.authentication.success");
      expect(events.map((e) => e.type)).toEqual(["user.merged", "user.updated"]);
      expect(events[0].data).toMatchObject({ user: { user_id: a.accountId }, primary_user_id: a.accountId, secondary_user_id: b.accountId });

      // "if this was not you" goes to every identifier of the secondary
      for (const to of [addr(b.own), e164(bPhone.phone)]) {
        await noticed(to, /merged into another account/);
      }
      const viewer = await gql(viaB, GQL.viewer);
      expect(viewer).toMatchObject({ id: a.accountId, mergeRole: "primary", mergedSecondary: { id: b.accountId, mergeRole: "secondary" } });
    });

    it("phone_number is in tokens and userinfo only when the primary itself has the phone", async () => {
      const a = await mailUser();
      const b = await fresh();
      await linked(a, { phone: e164((b.own as { phone: string }).phone) }, "merged");
      const viaPhone = await h.signIn(b.own);
      expect(viaPhone.accountId).toBe(a.accountId);
      expect(decodeJwt(viaPhone.idToken).phone_number).toBeUndefined();
      expect((await userinfo(viaPhone)).phone_number).toBeUndefined();
      const own = phone();
      await linked(viaPhone, { phone: own }, "attached");
      expect(await userinfo(viaPhone)).toMatchObject({ sub: a.accountId, phone_number: e164(own), phone_number_verified: true });
      expect(decodeJwt((await h.signIn({ phone: own })).idToken)).toMatchObject({ sub: a.accountId, phone_number: e164(own) });
    });

    it("merges and unmerges over GraphQL with typed results", async () => {
      const a = await fresh();
      const b = await mailUser();
      const req = await gql(a, GQL.request, b.own);
      const ver = await gql(a, GQL.verify, { stateId: req.stateId, otp: await h.mailbox.otp(addr(b.own)) });
      expect(ver).toEqual({ __typename: "VerifyLinkPayload", ...LINKED, outcome: "merged" });
      expect(await gql(a, GQL.unmerge)).toEqual({ __typename: "MessagePayload", message: "Accounts unmerged successfully" });
      expect(await unchanged(() => gql(a, GQL.unmerge))).toEqual({ __typename: "NotMerged", message: expect.any(String) });
    });

    it("attaching stays allowed while merged", async () => {
      const { p } = await mergedPair();
      const mail = { email: email() };
      await linked(p, mail, "attached");
      expect((await h.signIn(mail)).accountId).toBe(p.accountId);
    });
  });

  describe("verify refuses", () => {
    it("CannotLinkSelf at request for the account's own, attached and merged secondary's identifiers (REST and GraphQL)", async () => {
      const tel = { phone: phone() };
      const [p, s] = [await mailUser(), await fresh()];
      await linked(p, s.own, "merged");
      await linked(p, tel, "attached");
      for (const ident of [{ email: addr(p.own).toUpperCase() }, { phone: tel.phone.replace(/ /g, "") }, s.own]) {
        await refused(() => post(p, "request", ident), 409, "CannotLinkSelf");
      }
      const r = await unchanged(() => gql(p, GQL.request, s.own));
      expect(r.__typename).toBe("CannotLinkSelf");
    });

    it("CannotLinkSelf at verify: attached in the meantime, or on the merged secondary", async () => {
      const a = await fresh();
      const mail = { email: email() };
      const first = await challenge(a, mail);
      const second = await challenge(a, mail);
      expect((await post(a, "verify", first)).body.outcome).toBe("attached");
      await refused(() => post(a, "verify", second), 409, "CannotLinkSelf");

      const b = await fresh();
      const one = await challenge(a, b.own);
      const two = await challenge(a, b.own);
      const three = await challenge(a, b.own);
      expect((await post(a, "verify", one)).body.outcome).toBe("merged");
      await refused(() => post(a, "verify", two), 409, "CannotLinkSelf");
      expect(await unchanged(() => gql(a, GQL.verify, { stateId: three.state_id, otp: three.otp }))).toMatchObject({ __typename: "CannotLinkSelf" });
    });

    it("TargetSecondaryIdentity: the identifier is attached to another account", async () => {
      const tel = { phone: phone() };
      const mail = { email: email() };
      await fresh([tel, mail]);
      const a = await fresh();
      await refused(() => link(a, tel), 409, "TargetSecondaryIdentity");
      const req2 = await gql(a, GQL.request, mail);
      const otp = await h.mailbox.otp(addr(mail));
      expect(await unchanged(() => gql(a, GQL.verify, { stateId: req2.stateId, otp }))).toMatchObject({ __typename: "TargetSecondaryIdentity" });
    });

    it("TargetAlreadyLinked: the identifier's account is merged, as primary or as secondary", async () => {
      const { p, s } = await mergedPair();
      const a = await fresh();
      await refused(() => link(a, p.own), 409, "TargetAlreadyLinked");
      await refused(() => link(a, s.own), 409, "TargetAlreadyLinked");
      const req = await gql(a, GQL.request, s.own);
      const otp = await h.mailbox.otp(addr(s.own));
      expect(await unchanged(() => gql(a, GQL.verify, { stateId: req.stateId, otp }))).toMatchObject({ __typename: "TargetAlreadyLinked" });
    });

    it("AlreadyLinked: the current account is merged and the target is another's own; TargetAlreadyLinked goes first", async () => {
      const { p } = await mergedPair();
      const c = await fresh();
      await refused(() => link(p, c.own), 409, "AlreadyLinked");
      const req = await gql(p, GQL.request, c.own);
      const otp = await h.mailbox.otp(addr(c.own));
      expect(await unchanged(() => gql(p, GQL.verify, { stateId: req.stateId, otp }))).toMatchObject({ __typename: "AlreadyLinked" });
      const other = await mergedPair();
      await refused(() => link(p, other.s.own), 409, "TargetAlreadyLinked");
    });

    it("a refused verify leaves the state usable once the obstacle is gone", async () => {
      const { p, s } = await mergedPair();
      const c = await fresh();
      const ch = await challenge(p, c.own);
      await refused(() => post(p, "verify", ch), 409, "AlreadyLinked");
      expect((await post(p, "unmerge", {})).status).toBe(200);
      expect((await post(p, "verify", ch)).body).toEqual({ ...LINKED, outcome: "merged" });
      expect((await h.signIn(s.own)).accountId).toBe(s.accountId);
    });
  });

  describe("codes", () => {
    it("OTPInvalid: wrong code (retry allowed), unknown state, malformed code, another purpose", async () => {
      const a = await fresh();
      const mail = { email: email() };
      const ch = await challenge(a, mail);
      const wrong = ch.otp === "000000" ? "111111" : "000000";
      await refused(() => post(a, "verify", { ...ch, otp: wrong }), 400, "OTPInvalid");
      await refused(() => post(a, "verify", { ...ch, state_id: `otp_${randomBytes(8).toString("hex")}` }), 400, "OTPInvalid");
      await refused(() => post(a, "verify", { ...ch, otp: "12" }), 400, "OTPInvalid");
      await refused(() => post(a, "verify", { state_id: ch.state_id }), 400, "OTPInvalid");
      const gqlWrong = await unchanged(() => gql(a, GQL.verify, { stateId: ch.state_id, otp: wrong }));
      expect(gqlWrong).toEqual({ __typename: "OTPInvalid", message: expect.any(String) });
      // a sign-in state is not a link state
      const signInMail = email();
      const start = await h.call("POST", "/auth/otp/start", { body: { email: signInMail } });
      const signInOtp = await h.mailbox.otp(signInMail);
      await refused(() => post(a, "verify", { state_id: start.body.state_id, otp: signInOtp }), 400, "OTPInvalid");
      // the right code still works after wrong tries
      expect((await post(a, "verify", ch)).body).toEqual({ ...LINKED, outcome: "attached" });
    });

    it("OTPInvalid: a state presented by another account, which its owner can still use", async () => {
      const a = await fresh();
      const b = await fresh();
      const mail = { email: email() };
      const ch = await challenge(b, mail);
      await refused(() => post(a, "verify", ch), 400, "OTPInvalid");
      expect((await unchanged(() => gql(a, GQL.verify, { stateId: ch.state_id, otp: ch.otp }))).__typename).toBe("OTPInvalid");
      expect((await post(b, "verify", ch)).body.outcome).toBe("attached");
    });

    it("OTPInvalid: a state presented by another session of the account, which the session that asked can still use", async () => {
      const a = await fresh();
      const other = await h.signIn(a.own);
      const mail = { email: email() };
      const ch = await challenge(a, mail);
      await refused(() => post(other, "verify", ch), 400, "OTPInvalid");
      expect((await unchanged(() => gql(other, GQL.verify, { stateId: ch.state_id, otp: ch.otp }))).__typename).toBe("OTPInvalid");
      expect((await post(a, "verify", ch)).body.outcome).toBe("attached");
    });

    it("during an upgrade, a state the previous build wrote (bound to no session) is judged as before", async () => {
      const a = await fresh();
      const other = await h.signIn(a.own);
      const mail = { email: email() };
      const ch = await challenge(a, mail);
      await h.db.prisma.otpState.update({ where: { id: ch.state_id }, data: { sessionId: null } });
      expect((await post(other, "verify", ch)).body.outcome).toBe("attached");
    });

    it("a link begun by a session the owner ended is not completed from a stale session of the account", async () => {
      const owner = await fresh();
      // a token of the owner's, stolen and too old to start a link itself
      const stolen = await h.signIn(owner.own);
      await h.db.prisma.session.update({ where: { id: decodeJwt(stolen.token).sid as string }, data: { authTime: new Date(Date.now() - 3_600_000) } });
      const intruders = { email: email() };
      await linked(owner, intruders, "attached");
      const intruder = await h.signIn(intruders);
      const more = { email: email() };
      expect((await post(stolen, "request", more)).body.error).toBe("ReauthenticationRequired");
      const ch = await challenge(intruder, more);
      // the owner removes the intruder's way in, which ends the intruder's session
      expect((await post(owner, "remove", intruders)).status).toBe(200);
      await refused(() => post(stolen, "verify", ch), 400, "OTPInvalid");
      expect((await unchanged(() => gql(stolen, GQL.verify, { stateId: ch.state_id, otp: ch.otp }))).__typename).toBe("OTPInvalid");
      expect(await identifiersOf(owner.accountId)).toEqual([`own:${addr(owner.own)}`]);
      expect((await h.signIn(more)).accountId).not.toBe(owner.accountId);
    });

    it("OTPInvalid: an expired state", async () => {
      const a = await fresh();
      const ch = await challenge(a, { email: email() });
      await h.db.prisma.otpState.update({ where: { id: ch.state_id }, data: { expiresAt: new Date(Date.now() - 1000) } });
      await refused(() => post(a, "verify", ch), 400, "OTPInvalid");
    });

    it("OTPInvalid: five wrong codes kill the state", async () => {
      const a = await fresh();
      const ch = await challenge(a, { email: email() });
      const wrong = ch.otp === "000000" ? "111111" : "000000";
      for (let i = 0; i < 5; i++) await refused(() => post(a, "verify", { ...ch, otp: wrong }), 400, "OTPInvalid");
      await refused(() => post(a, "verify", ch), 400, "OTPInvalid");
    });

    it("a retried successful verify returns the same success; a wrong code on it stays OTPInvalid", async () => {
      const a = await fresh();
      const ch = await challenge(a, { email: email() });
      const first = await post(a, "verify", ch);
      expect(first.body).toEqual({ ...LINKED, outcome: "attached" });
      expect(await unchanged(() => post(a, "verify", ch))).toMatchObject({ status: 200, body: first.body });
      expect(await unchanged(() => gql(a, GQL.verify, { stateId: ch.state_id, otp: ch.otp }))).toEqual({ __typename: "VerifyLinkPayload", ...LINKED, outcome: "attached" });
      await refused(() => post(a, "verify", { ...ch, otp: ch.otp === "000000" ? "111111" : "000000" }), 400, "OTPInvalid");

      const b = await fresh();
      const m = await challenge(a, b.own);
      expect((await post(a, "verify", m)).body.outcome).toBe("merged");
      expect(await unchanged(() => post(a, "verify", m))).toMatchObject({ status: 200, body: { ...LINKED, outcome: "merged" } });
    });
  });

  describe("malformed input and credentials", () => {
    it("request: IdentifierRequired, InvalidIdentifier, InvalidRequest, 415, 413 — never a 500, never a change", async () => {
      const a = await fresh();
      for (const body of [{}, { email: "" }, { phone: "   " }]) await refused(() => post(a, "request", body), 400, "IdentifierRequired");
      for (const body of [{ email: "not-an-email" }, { phone: "2025550143" }, { phone: "+1 000" }, { email: `${"x".repeat(250)}@example.com` }]) {
        await refused(() => post(a, "request", body), 400, "InvalidIdentifier");
      }
      // null is a wrong type, not an absent field: with a phone beside it, the body names both
      for (const body of [{ email: email(), phone: phone() }, { email: null }, { email: null, phone: phone() }, { email: email(), phone: null }, { email: 42 }, { phone: ["+12025550100"] }, { email: { v: 1 } }, { emial: "a@example.com" }, [], "x", 7]) {
        await refused(() => post(a, "request", body), 400, "InvalidRequest");
      }
      const raw = (raw: string, type = "application/json") => h.call("POST", "/users/link/request", { raw, headers: { ...auth(a), "content-type": type } });
      await refused(() => raw("{"), 400, "InvalidRequest");
      await refused(() => raw('{"email": "a@example.com",}'), 400, "InvalidRequest");
      await refused(() => raw(JSON.stringify({ email: email() }), "text/plain"), 415, "UnsupportedMediaType");
      await refused(() => raw(JSON.stringify({ email: email() }), "application/x-www-form-urlencoded"), 415, "UnsupportedMediaType");
      await refused(() => h.call("POST", "/users/link/request", { raw: JSON.stringify({ email: email() }), headers: auth(a) }), 415, "UnsupportedMediaType");
      await refused(() => raw(JSON.stringify({ email: `${"a".repeat(70 * 1024)}@example.com` })), 413, "PayloadTooLarge");
    });

    it("verify, remove and unmerge validate their bodies too", async () => {
      const a = await fresh();
      for (const body of [{ state_id: 5, otp: "123456" }, { state_id: "otp_x", otp: 123456 }, { state_id: "otp_x", otp: "123456", extra: true }]) {
        await refused(() => post(a, "verify", body), 400, "InvalidRequest");
      }
      await refused(() => post(a, "remove", {}), 400, "IdentifierRequired");
      await refused(() => post(a, "remove", { email: "nope" }), 400, "InvalidIdentifier");
      await refused(() => post(a, "remove", { email: email(), phone: phone() }), 400, "InvalidRequest");
      await refused(() => post(a, "unmerge", { force: true }), 400, "InvalidRequest");
      await refused(() => h.call("POST", "/users/link/unmerge", { raw: "[", headers: { ...auth(a), "content-type": "application/json" } }), 400, "InvalidRequest");
      await refused(() => post(a, "verify", { state_id: "x".repeat(70 * 1024), otp: "123456" }), 413, "PayloadTooLarge");
      await refused(() => post(a, "remove", { email: `${"a".repeat(70 * 1024)}@example.com` }), 413, "PayloadTooLarge");
    });

    it("GraphQL answers bad input with typed results", async () => {
      const a = await fresh();
      expect((await unchanged(() => gql(a, GQL.request))).__typename).toBe("IdentifierRequired");
      expect((await unchanged(() => gql(a, GQL.request, { email: "nope" }))).__typename).toBe("InvalidIdentifier");
      expect((await unchanged(() => gql(a, GQL.request, { email: email(), phone: phone() }))).__typename).toBe("InvalidRequest");
      expect((await unchanged(() => gql(a, GQL.remove))).__typename).toBe("IdentifierRequired");
      expect((await unchanged(() => gql(a, GQL.verify, { stateId: "otp_nope", otp: "123456" }))).__typename).toBe("OTPInvalid");
    });

    it("Unauthenticated: no token, garbage, forged or tampered token, no or unknown API key", async () => {
      const a = await fresh();
      const claims = decodeJwt(a.token);
      const { privateKey } = await generateKeyPair("ES256");
      const forged = await new SignJWT({ ...claims })
        .setProtectedHeader({ ...decodeProtectedHeader(a.token), alg: "ES256" } as { alg: string })
        .sign(privateKey);
      const [head, payload, sig] = a.token.split(".");
      const otherSub = Buffer.from(JSON.stringify({ ...claims, sub: "acc_someone_else" })).toString("base64url");
      const tampered = `${head}.${otherSub}.${sig}`;
      const body = { email: email() };
      const cases: Array<Record<string, string>> = [
        {},
        { authorization: "Bearer" },
        { authorization: "Bearer not.a.jwt" },
        { authorization: `Basic ${a.token}` },
        { authorization: `Bearer ${forged}` },
        { authorization: `Bearer ${tampered}` },
        { authorization: `Bearer ${head}.${payload}.` },
        { ...auth(a), "x-api-key": "" },
        { ...auth(a), "x-api-key": `lg_test_${randomBytes(24).toString("base64url")}` },
      ];
      for (const route of ["request", "verify", "remove", "unmerge"]) {
        for (const headers of cases) {
          const r = await refused(() => h.call("POST", `/users/link/${route}`, { body: route === "verify" ? { state_id: "otp_x", otp: "123456" } : route === "unmerge" ? {} : body, headers }), 401, "Unauthenticated");
          expect(r.headers.get("www-authenticate")).toMatch(/^Bearer/);
        }
      }
      for (const headers of cases) {
        const r = await unchanged(() => h.gql(GQL.request, body, headers));
        expect(r.body.errors?.[0]?.extensions?.code, JSON.stringify(r.body)).toBe("UNAUTHENTICATED");
        expect(r.body.data?.requestLink ?? null).toBeNull();
      }
    });

    it("Forbidden: a token of project A with the API key of project B, both ways", async () => {
      const created = await h.gql(`mutation($n: String!) { createProject(name: $n) { __typename ... on CreateProjectPayload { apiKey project { id } } } }`, { n: `other-${tag}` }, { "x-admin-token": h.adminToken });
      const keyB = created.body.data.createProject.apiKey as string;
      expect(keyB).toBeTruthy();
      const a = await mailUser();
      for (const route of ["request", "verify", "remove", "unmerge"]) {
        await refused(() => post(a, route, route === "verify" ? { state_id: "otp_x", otp: "123456" } : route === "unmerge" ? {} : { email: email() }, { "x-api-key": keyB }), 403, "Forbidden");
      }
      const g = await unchanged(() => h.gql(GQL.unmerge, {}, { ...auth(a), "x-api-key": keyB }));
      expect(g.body.errors[0].extensions.code).toBe("FORBIDDEN");

      // a user of project B, with project A's key
      const mailB = email();
      const start = await h.call("POST", "/auth/otp/start", { body: { email: mailB }, headers: { "x-api-key": keyB } });
      const done = await h.call("POST", "/auth/otp/verify", { body: { state_id: start.body.state_id, otp: await h.mailbox.otp(mailB) }, headers: { "x-api-key": keyB } });
      const userB = { token: done.body.access_token } as User;
      await refused(() => post(userB, "request", { email: addr(a.own) }), 403, "Forbidden");
      // and B's user, with B's key, may not reach project A's identifiers
      const ok = await h.call("POST", "/users/link/request", { body: { email: addr(a.own) }, headers: { ...auth(userB), "x-api-key": keyB } });
      expect(ok.status).toBe(200);
      const otp = await h.mailbox.otp(addr(a.own));
      const v = await h.call("POST", "/users/link/verify", { body: { state_id: ok.body.state_id, otp }, headers: { ...auth(userB), "x-api-key": keyB } });
      expect(v.body).toEqual({ ...LINKED, outcome: "attached" }); // projects are separate worlds
      expect((await h.signIn(a.own)).accountId).toBe(a.accountId);
    });
  });

  describe("remove", () => {
    it("removes an attached identifier, notifies it, and frees it for a new sign-in or another account", async () => {
      const mail = { email: email() };
      const tel = { phone: phone() };
      const a = await fresh([mail, tel]);
      const since = await lastSeq();
      const r = await post(a, "remove", { email: addr(mail).toUpperCase() });
      expect(r).toMatchObject({ status: 200, body: { message: "Account unlinked successfully" } });
      expect(await identifiersOf(a.accountId)).toEqual([`own:${addr(a.own)}`, `attached:${e164(tel.phone)}`]);
      await noticed(addr(mail), /was removed from your account/);
      const events = await eventsSince(since);
      expect(events.map((e) => e.type)).toEqual(["user.identifier.unlinked", "user.updated"]);
      expect(events[0].data).toMatchObject({ user: { user_id: a.accountId }, identifier: { type: "email", value: addr(mail) } });

      // free again: a new account signs in with it
      const newcomer = await h.signIn(mail);
      expect(newcomer.accountId).not.toBe(a.accountId);
      // the phone over GraphQL, then another account attaches it
      expect(await gql(a, GQL.remove, { phone: tel.phone })).toEqual({ __typename: "MessagePayload", message: "Account unlinked successfully" });
      await noticed(e164(tel.phone), /phone number was removed from your account/);
      // the number that left learns what and when, not from where (30th review); the account's own learn all
      const texts = (to: string) => h.mailbox.messages.filter((m) => m.to === to && /phone number was removed/.test(m.text)).map((m) => m.text);
      expect(texts(e164(tel.phone))).toEqual([expect.stringMatching(/^When: [^\n]+ UTC\.$/m)]);
      await noticed(e164((a.own as { phone: string }).phone), /phone number was removed from your account[\s\S]*When: [^\n]+ From: /);
      const c = await fresh();
      await linked(c, tel, "attached");
    });

    it("removes an own identifier when another one is left", async () => {
      const extra = { email: email() };
      const a = await fresh([extra]);
      expect((await post(a, "remove", a.own)).status).toBe(200);
      expect((await h.signIn(extra)).accountId).toBe(a.accountId);
      expect((await h.signIn(a.own)).accountId).not.toBe(a.accountId);
    });

    it("IdentifierNotLinked and LastIdentifier change nothing", async () => {
      const a = await fresh();
      const b = await fresh([{ phone: phone() }]);
      await refused(() => post(a, "remove", { email: email() }), 409, "IdentifierNotLinked");
      await refused(() => post(a, "remove", b.own), 409, "IdentifierNotLinked");
      await refused(() => post(a, "remove", a.own), 409, "LastIdentifier");
      expect((await unchanged(() => gql(a, GQL.remove, b.own))).__typename).toBe("IdentifierNotLinked");
      expect((await unchanged(() => gql(a, GQL.remove, a.own))).__typename).toBe("LastIdentifier");
      // the primary of a merge still may not remove its own last identifier; the secondary's do not count
      const { p } = await mergedPair();
      await refused(() => post(p, "remove", p.own), 409, "LastIdentifier");
      // a merged secondary's identifiers are not the removing account's own business otherwise
      const other = await mergedPair();
      await refused(() => post(a, "remove", other.s.own), 409, "IdentifierNotLinked");
    });

    it("removing an identifier of the merged secondary is an unmerge, restoring the secondary exactly", async () => {
      const a = await fresh();
      const bTel = { phone: phone() };
      const b = await fresh([bTel]);
      const bBefore = await account(b.accountId);
      await linked(a, b.own, "merged");
      await h.signIn(b.own); // signing in via the secondary's identifier touches only the primary
      const since = await lastSeq();
      const r = await post(a, "remove", { phone: bTel.phone });
      expect(r).toMatchObject({ status: 200, body: { message: "Account unlinked successfully" } });
      expect(await account(b.accountId)).toEqual(bBefore);
      expect((await account(a.accountId)).mergedWithId).toBeNull();
      expect((await eventsSince(since)).map((e) => e.type)).toEqual(["user.unmerged", "user.updated"]);
      expect((await h.signIn(bTel)).accountId).toBe(b.accountId);
      expect((await h.signIn(a.own)).accountId).toBe(a.accountId);
      await noticed(addr(b.own), /separated from the account it was merged with/);
    });
  });

  describe("unmerge", () => {
    it("restores the secondary exactly and gives both their own sign-in back", async () => {
      const a = await fresh();
      const bTel = { phone: phone() };
      const b = await mailUser([bTel]);
      await h.gql(`mutation { updateProfile(name: "Bo") { __typename } }`, {}, auth(b));
      const bBefore = await account(b.accountId);
      await linked(a, b.own, "merged");
      const viaB = await h.signIn(b.own);
      expect(viaB.accountId).toBe(a.accountId);
      const since = await lastSeq();
      const r = await post(viaB, "unmerge", {});
      expect(r).toMatchObject({ status: 200, body: { message: "Accounts unmerged successfully" } });

      expect(await account(b.accountId)).toEqual(bBefore);
      expect(await account(a.accountId)).toMatchObject({ mergedWithId: null, mergeRole: null, mergedAt: null });
      const events = await eventsSince(since);
      expect(events.map((e) => e.type)).toEqual(["user.unmerged", "user.updated"]);
      expect(events[0].data).toMatchObject({ user: { user_id: a.accountId }, primary_user_id: a.accountId, secondary_user_id: b.accountId });
      for (const to of [addr(b.own), e164(bTel.phone)]) {
        await noticed(to, /separated from the account it was merged with/);
      }
      // the other side of the unmerge is not told where it was done from (30th review); the primary is
      const separated = (to: string) => h.mailbox.messages.filter((m) => m.to === to && /separated/.test(m.text)).map((m) => m.text);
      expect(separated(e164(bTel.phone)).at(-1)).toMatch(/^When: [^\n]+ UTC\.$/m);
      await noticed(e164((a.own as { phone: string }).phone), /separated from the account[\s\S]*When: [^\n]+ From: /);
      const backB = await h.signIn(b.own);
      expect(backB.accountId).toBe(b.accountId);
      expect(await userinfo(backB)).toMatchObject({ sub: b.accountId, name: "Bo", phone_number: e164(bTel.phone) });
      expect((await h.signIn(bTel)).accountId).toBe(b.accountId);
      expect((await h.signIn(a.own)).accountId).toBe(a.accountId);
      // the pre-merge token stays dead: merge ended those sessions for good
      expect((await h.call("GET", "/oauth/userinfo", { headers: auth(b) })).status).toBe(401);
      // and both may merge again, this time the other way round
      await linked(backB, a.own, "merged");
    });

    it("NotMerged for an account that is not merged (REST and GraphQL)", async () => {
      const a = await fresh();
      await refused(() => post(a, "unmerge", {}), 409, "NotMerged");
      const empty = await unchanged(() => h.call("POST", "/users/link/unmerge", { raw: "", headers: { ...auth(a), "content-type": "application/json" } }));
      expect(empty.body.error).toBe("NotMerged");
      expect((await unchanged(() => gql(a, GQL.unmerge))).__typename).toBe("NotMerged");
    });
  });

  // Numbering plans change (Mexico dropped the mobile "1" in 2019: +52 1 55… is no longer a valid
  // number): a number proven before is still held, and its owner must be able to remove it.
  // Checked for validity as a new number, it was 400 InvalidIdentifier, and stayed on the account.
  it("a held number that is no longer valid (its numbering plan changed) is still removed", async () => {
    const mail = `plan-${randomBytes(3).toString("hex")}@example.com`;
    const a = await h.signIn({ email: mail });
    const old = "+5215512345678";
    await h.db.prisma.identifier.create({ data: { id: newId("idt"), projectId: h.projectId, accountId: a.accountId, kind: "phone", value: old, origin: "attached" } });
    const r = await post(a, "remove", { phone: "+52 1 55 1234 5678" });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(await identifiersOf(a.accountId)).toEqual([`own:${mail}`]);
    // a number nobody holds is still refused as before, and what is no number at all too
    expect((await post(a, "remove", { phone: "+5215512345679" })).body.error).toBe("IdentifierNotLinked");
    expect((await post(a, "remove", { phone: "+52 1 55 abc" })).body.error).toBe("InvalidIdentifier");
  });

  // A number no longer valid (above), or one codes are not texted to, is held but signs in no
  // more: a sign-in with it is 400 InvalidIdentifier before any code is sent. Counted as a way in,
  // it let the owner remove the account's last address that still signed in, and the account was
  // locked out for good (docs/external-identities.md: an account keeps at least one identifier it
  // can sign in with).
  it("a held number that signs in no more is not a way in: removing the last address that does is LastIdentifier", async () => {
    const mail = `plan-last-${randomBytes(3).toString("hex")}@example.com`;
    const a = await h.signIn({ email: mail });
    for (const old of ["+5215512345677", "+19005550123"]) {
      await h.db.prisma.identifier.create({ data: { id: newId("idt"), projectId: h.projectId, accountId: a.accountId, kind: "phone", value: old, origin: "attached" } });
      const start = await h.call("POST", "/auth/otp/start", { body: { phone: old } });
      expect(start.body.error, `${old}: ${JSON.stringify(start.body)}`).toBe("InvalidIdentifier");
    }
    await refused(() => post(a, "remove", { email: mail }), 409, "LastIdentifier");
    expect((await h.signIn({ email: mail })).accountId).toBe(a.accountId);
    // a number that still signs in counts, as before
    const tel = { phone: phone() };
    await linked(a, tel, "attached");
    expect((await post(a, "remove", { email: mail })).status).toBe(200);
    expect((await h.signIn(tel)).accountId).toBe(a.accountId);
  });

  it("stores every code as a hash", async () => {
    const states = await h.db.prisma.otpState.findMany({ select: { codeHash: true } });
    expect(states.length).toBeGreaterThan(0);
    for (const s of states) expect(s.codeHash).toMatch(/^[0-9a-f]{64}$/);
  });

  describe("rate limits (an app with sendsPerAccount 2/min and failuresPerSubject 3/min)", () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(backend, { limits: SMALL_LIMITS });
    });
    afterAll(() => h?.close());

    it("link requests per account: 429 RateLimited with Retry-After, over REST and GraphQL", async () => {
      const a = await h.signIn({ email: `rl-${tag}@example.com` });
      const auth = { authorization: `Bearer ${a.token}` };
      for (let i = 0; i < 2; i++) {
        expect((await h.call("POST", "/users/link/request", { body: { email: `rl-${tag}-${i}@example.com` }, headers: auth })).status).toBe(200);
      }
      const r = await h.call("POST", "/users/link/request", { body: { email: `rl-${tag}-x@example.com` }, headers: auth });
      expect(r.status).toBe(429);
      expect(r.body).toEqual({ error: "RateLimited", message: expect.any(String) });
      const retry = Number(r.headers.get("retry-after"));
      expect(retry).toBeGreaterThan(0);
      // until the first request leaves the sliding minute: a minute and a quarter at most (docs/security.md)
      expect(retry).toBeLessThanOrEqual(75);
      const g = await h.gql(`mutation { requestLink(email: "rl-${tag}-y@example.com") { __typename ... on RateLimited { retryAfterSeconds message } } }`, {}, auth);
      expect(g.body.data.requestLink).toMatchObject({ __typename: "RateLimited", retryAfterSeconds: expect.any(Number) });
      // no code went out for the refused requests
      expect(h.mailbox.messages.filter((m) => m.to.startsWith(`rl-${tag}-x`) || m.to.startsWith(`rl-${tag}-y`))).toEqual([]);
      // another account has its own budget
      const b = await h.signIn({ email: `rl2-${tag}@example.com` });
      expect((await h.call("POST", "/users/link/request", { body: { email: `rl2-${tag}-0@example.com` }, headers: { authorization: `Bearer ${b.token}` } })).status).toBe(200);
    });

    it("wrong codes per account: after the limit even the right code is refused with 429", async () => {
      const a = await h.signIn({ email: `wc-${tag}@example.com` });
      const auth = { authorization: `Bearer ${a.token}` };
      const mail = `wc-${tag}-0@example.com`;
      const start = await h.call("POST", "/users/link/request", { body: { email: mail }, headers: auth });
      const otp = await h.mailbox.otp(mail);
      const wrong = otp === "000000" ? "111111" : "000000";
      for (let i = 0; i < 3; i++) {
        expect((await h.call("POST", "/users/link/verify", { body: { state_id: start.body.state_id, otp: wrong }, headers: auth })).body.error).toBe("OTPInvalid");
      }
      const r = await h.call("POST", "/users/link/verify", { body: { state_id: start.body.state_id, otp }, headers: auth });
      expect(r.status).toBe(429);
      expect(r.body.error).toBe("RateLimited");
      expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(await h.db.prisma.identifier.count({ where: { value: mail } })).toBe(0);
      const g = await h.gql(`mutation($s: String!, $o: String!) { verifyLink(stateId: $s, otp: $o) { __typename } }`, { s: start.body.state_id, o: otp }, auth);
      expect(g.body.data.verifyLink.__typename).toBe("RateLimited");
    });
  });
});
