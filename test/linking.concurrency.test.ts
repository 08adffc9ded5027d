// Linking under real parallel requests on Postgres (PGlite has one connection, so nothing
// races there): whatever interleaving the server picks, the result is one of the outcomes a
// serial order would give, the loser gets a clean domain error, and nothing answers 500.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends, type Backend } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

type User = { token: string; accountId: string; own: Ident };
type Ident = { email: string } | { phone: string };
type Res = { status: number; body: any };

const ROUNDS = 5;
// starts with a letter: the test mailbox reads the first six-digit word of a whole message, headers included
const tag = `t${randomBytes(3).toString("hex")}`;
let seq = 0;
const email = () => `race-${tag}-${++seq}@example.com`;
let phoneSeq = 0;
const phone = () => `+1202555${String(++phoneSeq).padStart(4, "0")}`;
const addr = (i: Ident) => ("email" in i ? i.email : i.phone);
const LINKED = { message: "Account linked successfully" };

const outcome = (r: Res) => (r.status === 200 ? (r.body.outcome ?? "ok") : `${r.status} ${r.body.error}`);

describe.skipIf(!backends.includes("postgres"))("linking races on postgres", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness("postgres");
  });
  afterAll(() => h?.close());

  const auth = (u: User) => ({ authorization: `Bearer ${u.token}` });
  const post = (u: User, route: string, body: unknown) => h.call("POST", `/users/link/${route}`, { body, headers: auth(u) });
  async function user(first: Ident = { phone: phone() }, extra: Ident[] = []): Promise<User> {
    const u = { ...(await h.signIn(first)), own: first };
    for (const i of extra) expect((await post(u, "verify", await challenge(u, i))).body.outcome).toBe("attached");
    return u;
  }
  async function challenge(u: User, i: Ident) {
    const r = await post(u, "request", i);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return { state_id: r.body.state_id as string, otp: await h.mailbox.otp(addr(i)) };
  }
  const verify = (u: User, ch: { state_id: string; otp: string }) => post(u, "verify", ch);
  async function merged(p: User, s: User) {
    expect((await verify(p, await challenge(p, s.own))).body).toEqual({ ...LINKED, outcome: "merged" });
  }
  const holderOf = async (i: Ident) => (await h.db.prisma.identifier.findMany({ where: { value: addr(i) } })).map((r) => r.accountId);
  const acc = (id: string) => h.db.prisma.account.findUniqueOrThrow({ where: { id } });

  /** Whatever happened, the stored merges are symmetric and one per account. */
  async function consistent() {
    const accounts = await h.db.prisma.account.findMany();
    const byId = new Map(accounts.map((a) => [a.id, a]));
    for (const a of accounts) {
      if (!a.mergedWithId) {
        expect(a.mergeRole).toBeNull();
        continue;
      }
      const partner = byId.get(a.mergedWithId)!;
      expect(partner.mergedWithId).toBe(a.id);
      expect([a.mergeRole, partner.mergeRole].sort()).toEqual(["primary", "secondary"]);
    }
  }
  function no500(...rs: Res[]) {
    for (const r of rs) expect(r.status, JSON.stringify(r.body)).toBeLessThan(500);
  }

  it("two accounts verify the same unused identifier: one attaches it, the other gets TargetSecondaryIdentity", async () => {
    const [a, b] = [await user(), await user()];
    for (let round = 0; round < ROUNDS; round++) {
      const target = round % 2 ? { email: email() } : { phone: phone() };
      const [ca, cb] = [await challenge(a, target), await challenge(b, target)];
      const rs = await Promise.all([verify(a, ca), verify(b, cb)]);
      no500(...rs);
      expect(rs.map(outcome).sort()).toEqual(["409 TargetSecondaryIdentity", "attached"]);
      const winner = rs[0].status === 200 ? a : b;
      expect(await holderOf(target)).toEqual([winner.accountId]);
    }
    await consistent();
  });

  it("the same state verified three times at once decides once and answers the same success each time", async () => {
    const a = await user();
    for (let round = 0; round < ROUNDS; round++) {
      const target = { phone: phone() };
      const ch = await challenge(a, target);
      const rs = await Promise.all([verify(a, ch), verify(a, ch), verify(a, ch)]);
      no500(...rs);
      expect(rs.map((r) => r.body)).toEqual([0, 1, 2].map(() => ({ ...LINKED, outcome: "attached" })));
      expect(await holderOf(target)).toEqual([a.accountId]);
      expect(await h.db.prisma.outboxEvent.count({ where: { eventType: "user.identifier.linked", body: { contains: target.phone } } })).toBe(1);
    }
  });

  it("a verify racing the remove of an attached identifier", async () => {
    const [a, b] = [await user(), await user()];
    for (let round = 0; round < ROUNDS; round++) {
      const x = { phone: phone() };
      expect((await verify(a, await challenge(a, x))).body.outcome).toBe("attached");
      const ch = await challenge(b, x);
      const [removed, verified] = await Promise.all([post(a, "remove", x), verify(b, ch)]);
      no500(removed, verified);
      expect(removed.status).toBe(200);
      if (verified.status === 200) {
        expect(verified.body.outcome).toBe("attached");
        expect(await holderOf(x)).toEqual([b.accountId]);
      } else {
        expect(outcome(verified)).toBe("409 TargetSecondaryIdentity");
        expect(await holderOf(x)).toEqual([]);
      }
    }
    await consistent();
  });

  it("a merge racing the remove of the target's own identifier: either the remove wins and the verify attaches, or the merge wins and the remove is refused", async () => {
    const seen = new Set<string>();
    for (let round = 0; round < ROUNDS; round++) {
      const a = await user(undefined, [{ phone: phone() }]);
      const b = await user();
      const before = await acc(a.accountId);
      const ch = await challenge(b, a.own);
      const [removed, verified] = await Promise.all([post(a, "remove", a.own), verify(b, ch)]);
      no500(removed, verified);
      seen.add(`${outcome(removed)} / ${outcome(verified)}`);
      if (verified.body.outcome === "merged") {
        // the secondary's session ended with the merge; it could not change anything afterwards
        expect(outcome(removed)).toBe("401 Unauthenticated");
        expect(await holderOf(a.own)).toEqual([a.accountId]);
        expect(await acc(a.accountId)).toEqual({ ...before, mergedWithId: b.accountId, mergeRole: "secondary", mergedAt: expect.any(Date) });
      } else {
        expect([outcome(removed), outcome(verified)]).toEqual(["ok", "attached"]);
        expect(await holderOf(a.own)).toEqual([b.accountId]);
        expect((await acc(a.accountId)).mergedWithId).toBeNull();
      }
    }
    expect([...seen].every((s) => ["ok / attached", "401 Unauthenticated / merged"].includes(s)), [...seen].join(", ")).toBe(true);
    await consistent();
  });

  it("two removes that would leave no identifier: one succeeds, the other is LastIdentifier", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const x = { phone: phone() };
      const a = await user(undefined, [x]);
      const rs = await Promise.all([post(a, "remove", a.own), post(a, "remove", x)]);
      no500(...rs);
      expect(rs.map(outcome).sort()).toEqual(["409 LastIdentifier", "ok"]);
      expect(await h.db.prisma.identifier.count({ where: { accountId: a.accountId } })).toBe(1);
    }
  });

  it("a verify of the secondary's identifier racing an unmerge", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const [p, s, c] = [await user(), await user(), await user()];
      await merged(p, s);
      const ch = await challenge(c, s.own);
      const [unmerged, verified] = await Promise.all([post(p, "unmerge", {}), verify(c, ch)]);
      no500(unmerged, verified);
      expect(unmerged.status).toBe(200);
      const sNow = await acc(s.accountId);
      if (verified.status === 200) {
        expect(verified.body.outcome).toBe("merged");
        expect(sNow).toMatchObject({ mergedWithId: c.accountId, mergeRole: "secondary" });
      } else {
        expect(outcome(verified)).toBe("409 TargetAlreadyLinked");
        expect(sNow).toMatchObject({ mergedWithId: null, mergeRole: null });
      }
      expect((await acc(p.accountId)).mergedWithId).toBeNull();
    }
    await consistent();
  });

  it("the primary verifying a new merge while unmerging", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const [p, s, c] = [await user(), await user(), await user()];
      await merged(p, s);
      const ch = await challenge(p, c.own);
      const [unmerged, verified] = await Promise.all([post(p, "unmerge", {}), verify(p, ch)]);
      no500(unmerged, verified);
      expect(unmerged.status).toBe(200);
      const pNow = await acc(p.accountId);
      if (verified.status === 200) {
        expect(verified.body.outcome).toBe("merged");
        expect(pNow).toMatchObject({ mergedWithId: c.accountId, mergeRole: "primary" });
      } else {
        expect(outcome(verified)).toBe("409 AlreadyLinked");
        expect(pNow.mergedWithId).toBeNull();
      }
      expect((await acc(s.accountId)).mergedWithId).toBeNull();
    }
    await consistent();
  });

  it("two merges into one account at once: one merges, the other is AlreadyLinked", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const [a, b, c] = [await user(), await user({ email: email() }), await user()];
      const [cb, cc] = [await challenge(a, b.own), await challenge(a, c.own)];
      const rs = await Promise.all([verify(a, cb), verify(a, cc)]);
      no500(...rs);
      expect(rs.map(outcome).sort()).toEqual(["409 AlreadyLinked", "merged"]);
      const partner = rs[0].status === 200 ? b : c;
      expect(await acc(a.accountId)).toMatchObject({ mergedWithId: partner.accountId, mergeRole: "primary" });
    }
    await consistent();
  });

  it("two accounts merging the same account at once: one wins, the other is TargetAlreadyLinked", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const [a, b, c] = [await user(), await user(), await user()];
      const [ab, cb] = [await challenge(a, b.own), await challenge(c, b.own)];
      const rs = await Promise.all([verify(a, ab), verify(c, cb)]);
      no500(...rs);
      expect(rs.map(outcome).sort()).toEqual(["409 TargetAlreadyLinked", "merged"]);
      const winner = rs[0].status === 200 ? a : c;
      expect(await acc(b.accountId)).toMatchObject({ mergedWithId: winner.accountId, mergeRole: "secondary" });
    }
    await consistent();
  });

  it("two accounts merging each other at once: exactly one merge, the other side's session is over", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const [a, b] = [await user(), await user()];
      const [ab, ba] = [await challenge(a, b.own), await challenge(b, a.own)];
      const rs = await Promise.all([verify(a, ab), verify(b, ba)]);
      no500(...rs);
      expect(rs.map(outcome).sort()).toEqual(["401 Unauthenticated", "merged"]);
      const [winner, loser] = rs[0].status === 200 ? [a, b] : [b, a];
      expect(await acc(loser.accountId)).toMatchObject({ mergedWithId: winner.accountId, mergeRole: "secondary" });
    }
    await consistent();
  });
});
