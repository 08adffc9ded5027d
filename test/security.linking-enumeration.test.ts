// Linking must not be an oracle for who holds an identifier: a link request answers the same
// whoever holds the identifier (docs/rest.md), a state only works for the account it was
// issued to, and codes are stored only as keyed hashes.
import { createHash, createHmac, randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends, type Backend } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

type User = { token: string; accountId: string };
type Ident = { email: string } | { phone: string };

// starts with a letter: the test mailbox reads the first six-digit word of a whole message, headers included
const tag = `t${randomBytes(3).toString("hex")}`;
let seq = 0;
const email = () => `enum-${tag}-${++seq}@example.com`;
let phoneSeq = 0;
const phone = () => `+1202555${String(7000 + ++phoneSeq).padStart(4, "0")}`;
const addr = (i: Ident) => ("email" in i ? i.email : i.phone);

describe.each(backends)("link enumeration on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const auth = (u: User) => ({ authorization: `Bearer ${u.token}` });
  const post = (u: User, route: string, body: unknown) => h.call("POST", `/users/link/${route}`, { body, headers: auth(u) });
  async function linkTo(u: User, i: Ident) {
    const r = await post(u, "request", i);
    const v = await post(u, "verify", { state_id: r.body.state_id, otp: await h.mailbox.otp(addr(i)) });
    expect(v.status, JSON.stringify(v.body)).toBe(200);
  }
  async function identity() {
    const p = h.db.prisma;
    return { accounts: await p.account.findMany({ orderBy: { id: "asc" } }), identifiers: await p.identifier.findMany({ orderBy: { id: "asc" } }) };
  }

  /** The part of a response a caller could tell apart, with the random state id reduced to its shape. */
  function observable(r: { status: number; body: any; headers: Headers }) {
    const headers = [...r.headers.keys()].filter((k) => k !== "x-request-id").sort();
    const body = JSON.stringify(r.body).replace(/otp_[A-Za-z0-9_-]+/g, (s) => `otp_<${s.length}>`);
    return { status: r.status, body, headers, type: r.headers.get("content-type") };
  }

  it("request answers the same for unused, another's own, another's attached and a merged account's identifiers", async () => {
    const me = await h.signIn({ email: email() });
    const holderOwn = { email: email() };
    const attachedMail = { email: email() };
    const holder = await h.signIn(holderOwn);
    await linkTo(holder, attachedMail);
    const [primaryOwn, secondaryOwn] = [{ email: email() }, { email: email() }];
    const primary = await h.signIn(primaryOwn);
    await h.signIn(secondaryOwn);
    await linkTo(primary, secondaryOwn);
    const phoneOwner = { phone: phone() };
    const attachedPhone = { phone: phone() };
    await linkTo(await h.signIn(phoneOwner), attachedPhone);

    const cases: Record<string, Ident> = {
      "unused e-mail": { email: email() },
      "another account's own e-mail": holderOwn,
      "another account's attached e-mail": attachedMail,
      "a merged primary's e-mail": primaryOwn,
      "a merged secondary's e-mail": secondaryOwn,
    };
    const phones: Record<string, Ident> = {
      "unused phone": { phone: phone() },
      "another account's own phone": phoneOwner,
      "another account's attached phone": attachedPhone,
    };

    const before = await identity();
    const seen = new Map<string, ReturnType<typeof observable>>();
    const subjects = new Map<string, string | undefined>();
    for (const [label, ident] of Object.entries({ ...cases, ...phones })) {
      const r = await post(me, "request", ident);
      expect(r.status, label).toBe(200);
      expect(Object.keys(r.body), label).toEqual(["state_id"]);
      seen.set(label, observable(r));
      // a code really went out, worded the same way
      const sent = h.mailbox.messages.filter((m) => m.to === addr(ident).toLowerCase()).at(-1)!;
      subjects.set(label, sent.subject ?? sent.text.replace(/\d{6}/, "<code>"));
      await h.mailbox.otp(addr(ident));
    }
    const mails = Object.keys(cases).map((k) => [seen.get(k), subjects.get(k)]);
    for (const m of mails) expect(m).toEqual(mails[0]);
    const tels = Object.keys(phones).map((k) => [seen.get(k), subjects.get(k)]);
    for (const t of tels) expect(t).toEqual(tels[0]);
    // the e-mail and phone answers differ only in the message channel, not in the response
    expect(tels[0][0]).toEqual(mails[0][0]);

    // GraphQL: the same typed result every time
    for (const ident of Object.values({ ...cases, ...phones })) {
      const g = await h.gql(`mutation($email: String, $phone: String) { requestLink(email: $email, phone: $phone) { __typename } }`, ident, auth(me));
      expect(g.body).toEqual({ data: { requestLink: { __typename: "OtpChallenge" } } });
      await h.mailbox.otp(addr(ident));
    }
    // and asking changed nobody's account
    expect(await identity()).toEqual(before);
  });

  it("a state presented by another account is OTPInvalid, indistinguishable from an unknown state, and stays usable for its owner", async () => {
    const owner = await h.signIn({ email: email() });
    const thief = await h.signIn({ email: email() });
    const target = { email: email() };
    const r = await post(owner, "request", target);
    const otp = await h.mailbox.otp(target.email);
    const before = await identity();

    const stolen = await post(thief, "verify", { state_id: r.body.state_id, otp });
    const unknown = await post(thief, "verify", { state_id: `otp_${randomBytes(16).toString("base64url")}`, otp });
    const wrong = await post(owner, "verify", { state_id: r.body.state_id, otp: otp === "000000" ? "111111" : "000000" });
    for (const res of [stolen, unknown, wrong]) {
      expect(res.status).toBe(400);
      expect(res.body).toEqual(stolen.body);
    }
    expect(stolen.body.error).toBe("OTPInvalid");
    const g = await h.gql(`mutation($s: String!, $o: String!) { verifyLink(stateId: $s, otp: $o) { __typename } }`, { s: r.body.state_id, o: otp }, auth(thief));
    expect(g.body.data.verifyLink.__typename).toBe("OTPInvalid");
    // a sign-in with the same state id is refused too: the state is bound to its purpose
    const asSignIn = await h.call("POST", "/auth/otp/verify", { body: { state_id: r.body.state_id, otp } });
    expect(asSignIn.body.error).toBe("OTPInvalid");
    expect(await identity()).toEqual(before);

    const ok = await post(owner, "verify", { state_id: r.body.state_id, otp });
    expect(ok.body).toEqual({ message: "Account linked successfully", outcome: "attached" });
    // once used, presenting it elsewhere still reveals nothing
    const after = await post(thief, "verify", { state_id: r.body.state_id, otp });
    expect(after.body).toEqual(stolen.body);
  });

  it("codes are stored only as keyed hashes", async () => {
    const me = await h.signIn({ email: email() });
    const target = { phone: phone() };
    const r = await post(me, "request", target);
    const code = await h.mailbox.otp(target.phone);
    const row = await h.db.prisma.otpState.findUniqueOrThrow({ where: { id: r.body.state_id } });
    expect(row.codeHash).toMatch(/^[0-9a-f]{64}$/);
    const guesses = [
      code,
      createHash("sha256").update(code).digest("hex"),
      createHash("sha256").update(`${row.id}:${code}`).digest("hex"),
      createHmac("sha256", "").update(`${row.id}:${code}`).digest("hex"),
      createHmac("sha256", code).update(row.id).digest("hex"),
    ];
    expect(guesses).not.toContain(row.codeHash);
    for (const [column, v] of Object.entries(row)) {
      if (column === "id") continue;
      expect(JSON.stringify(v) ?? "", column).not.toContain(code);
    }
    // with raw SQL too: no column of any state holds a sent code
    const raw = await h.db.prisma.$queryRawUnsafe<Record<string, unknown>[]>(`SELECT * FROM otp_states WHERE id = $1`, row.id);
    expect(Object.entries(raw[0]).filter(([k, v]) => k !== "id" && String(v).includes(code))).toEqual([]);
  });
});
