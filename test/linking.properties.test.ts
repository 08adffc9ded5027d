// Model-based property test of linking: random sequences of sign-in, link (request + verify),
// remove and unmerge over a small pool of identifiers, run against the real app and against a
// small model of docs/rest.md and of what an unmerge removes (docs/security.md). Every answer
// must be the one the model predicts, and after every step the database must satisfy the
// invariants below and match the model.
import { randomBytes } from "node:crypto";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends, type Backend } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

type Ident = { email: string } | { phone: string };
type Act =
  | { t: "signIn"; x: number }
  | { t: "link"; who: number; x: number }
  | { t: "remove"; who: number; x: number }
  | { t: "unmerge"; who: number };
type Res = { status: number; body: any };

/** identifiers 0 and 1 are e-mails, 2 to 5 phones; four accounts sign up with 0, 2, 3 and 4 at the start of each run */
const POOL = 6;
const INITIAL = [0, 2, 3, 4];
/**
 * A random starting state: none, one or both of these merges (the first identifier's account
 * links the second). Both is the likeliest, as two merged pairs reach the rarest rows of the table.
 */
const PREMERGES: Array<[number, number]> = [
  [0, 2],
  [3, 4],
];
const premerged = fc.constantFrom([], [PREMERGES[0]], [PREMERGES[1]], PREMERGES, PREMERGES);
/** modest by default; LINKING_PROPERTY_RUNS=200 for a soak */
const NUM_RUNS = Number(process.env.LINKING_PROPERTY_RUNS) || 10;
/** A failure prints its seed and path: LINKING_PROPERTY_SEED and LINKING_PROPERTY_PATH run that case again. */
const replay = process.env.LINKING_PROPERTY_SEED ? { seed: Number(process.env.LINKING_PROPERTY_SEED), path: process.env.LINKING_PROPERTY_PATH } : {};

const act: fc.Arbitrary<Act> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ t: fc.constant("signIn" as const), x: fc.nat(POOL - 1) }) },
  { weight: 5, arbitrary: fc.record({ t: fc.constant("link" as const), who: fc.nat(5), x: fc.nat(POOL - 1) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("remove" as const), who: fc.nat(5), x: fc.nat(POOL - 1) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("unmerge" as const), who: fc.nat(5) }) },
);

// starts with a letter: the test mailbox reads the first six-digit word of a whole message, headers included
const tag = `t${randomBytes(3).toString("hex")}`;
let world = 0;

/**
 * The linking rules of docs/rest.md (POST /users/link/verify) over identifiers and accounts, and
 * what an unmerge removes (docs/security.md, "Sessions"): an address attached by a session
 * remembers what that session signed in with (`via`), and one attached by way of the merged
 * secondary's identifiers, followed to the end, is removed from the primary; the secondary keeps
 * exactly its own. One session per account: the
 * latest sign-in that landed on it, which signed in with `proof`.
 */
class Model {
  holder = new Map<number, { acc: string; origin: "own" | "attached"; via: number | null }>();
  partner = new Map<string, string>();
  role = new Map<string, "primary" | "secondary">();
  tokens = new Map<string, string>();
  proof = new Map<string, number>();

  primaryOf = (acc: string) => (this.role.get(acc) === "secondary" ? this.partner.get(acc)! : acc);
  idsOf = (acc: string) => [...this.holder].filter(([, v]) => v.acc === acc).map(([x]) => x);
  actors = () => [...this.tokens.keys()].sort();

  /** what requesting and verifying identifier x as `acc` must answer */
  link(acc: string, x: number): string {
    const h = this.holder.get(x);
    if (h && (h.acc === acc || h.acc === this.partner.get(acc))) return "CannotLinkSelf";
    if (!h) {
      this.holder.set(x, { acc, origin: "attached", via: this.proof.get(acc) ?? null });
      return "attached";
    }
    if (h.origin === "attached") return "TargetSecondaryIdentity";
    if (this.partner.has(h.acc)) return "TargetAlreadyLinked";
    if (this.partner.has(acc)) return "AlreadyLinked";
    this.partner.set(acc, h.acc).set(h.acc, acc);
    this.role.set(acc, "primary").set(h.acc, "secondary");
    this.tokens.delete(h.acc);
    this.proof.delete(h.acc);
    return "merged";
  }

  remove(acc: string, x: number): string {
    const h = this.holder.get(x);
    const onSecondary = !!h && this.role.get(acc) === "primary" && h.acc === this.partner.get(acc);
    if (!h || (h.acc !== acc && !onSecondary)) return "IdentifierNotLinked";
    if (onSecondary) return this.separate(acc), "ok";
    // what would leave with the secondary is not the account's own last way in
    const leaving = this.leavingOnUnmerge(acc);
    if (!this.idsOf(acc).some((y) => y !== x && !leaving.has(y))) return "LastIdentifier";
    // what was proven with it now counts as proven with what proved it
    const itsProof = h.via;
    for (const v of this.holder.values()) if (v.acc === acc && v.via === x) v.via = itsProof;
    if (this.proof.get(acc) === x) itsProof === null ? this.proof.delete(acc) : this.proof.set(acc, itsProof);
    this.holder.delete(x);
    return "ok";
  }

  unmerge(acc: string): string {
    if (this.role.get(acc) !== "primary") return "NotMerged";
    this.separate(acc);
    return "ok";
  }

  /** The primary's identifiers proven through its secondary's, followed to the end. */
  leavingOnUnmerge(acc: string): Set<number> {
    const other = this.partner.get(acc);
    if (this.role.get(acc) !== "primary" || !other) return new Set();
    const reached = new Set(this.idsOf(other));
    const leaving = new Set<number>();
    for (let grew = true; grew; ) {
      grew = false;
      for (const [y, v] of this.holder) {
        if (v.acc !== acc || v.via === null || !reached.has(v.via) || reached.has(y)) continue;
        reached.add(y);
        leaving.add(y);
        grew = true;
      }
    }
    return leaving;
  }

  separate(acc: string) {
    const other = this.partner.get(acc)!;
    for (const y of this.leavingOnUnmerge(acc)) this.holder.delete(y);
    for (const a of [acc, other]) this.partner.delete(a), this.role.delete(a);
  }
}

describe.each(backends)("linking properties on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    // no rate limit gets in the way of a long random sequence
    const plenty = { max: 100_000, windowSeconds: 600 };
    h = await startHarness(backend, { limits: { sendsPerIdentifier: plenty, sendsPerAccount: plenty, failuresPerSubject: plenty } });
  });
  afterAll(() => h?.close());

  const post = (token: string, route: string, body: unknown): Promise<Res> =>
    h.call("POST", `/users/link/${route}`, { body, headers: { authorization: `Bearer ${token}` } });
  const answer = (r: Res) => (r.status === 200 ? (r.body.outcome ?? "ok") : r.body.error);

  async function snapshot() {
    const p = h.db.prisma;
    return {
      accounts: await p.account.findMany({ orderBy: { id: "asc" } }),
      identifiers: await p.identifier.findMany({ orderBy: { id: "asc" } }),
      liveSessions: await p.session.count({ where: { endedAt: null } }),
      userEvents: await p.outboxEvent.count({ where: { eventType: { startsWith: "user." } } }),
    };
  }

  it("random link, remove, unmerge and sign-in sequences keep every invariant and follow the rules", async () => {
    await fc.assert(
      fc.asyncProperty(premerged, fc.array(act, { minLength: 4, maxLength: 10 }), async (premerges, acts) => {
        const run = ++world;
        const pool: Ident[] = Array.from({ length: POOL }, (_, k) =>
          k < 2 ? { email: `prop-${tag}-${run}-${k}@example.com` } : { phone: `+1202555${String((run * 4 + k - 2) % 10_000).padStart(4, "0")}` },
        );
        const value = (x: number) => Object.values(pool[x])[0] as string;
        const m = new Model();
        const log: string[] = [];

        async function signIn(x: number) {
          const expected = m.holder.get(x) ? m.primaryOf(m.holder.get(x)!.acc) : null;
          const u = await h.signIn(pool[x]);
          if (expected) expect(u.accountId, log.join("\n")).toBe(expected);
          else {
            expect([...m.holder.values()].map((v) => v.acc), log.join("\n")).not.toContain(u.accountId);
            m.holder.set(x, { acc: u.accountId, origin: "own", via: null });
          }
          m.tokens.set(u.accountId, u.token);
          m.proof.set(u.accountId, x);
          return u.accountId;
        }

        /** runs one call; an answer that is an error must leave everything as it was */
        async function step(expected: string, call: () => Promise<Res>) {
          const before = expected === "ok" || expected === "attached" || expected === "merged" ? null : await snapshot();
          const r = await call();
          expect(r.status, log.join("\n")).toBeLessThan(500);
          expect(answer(r), `${log.join("\n")}\n-> ${JSON.stringify(r.body)}`).toBe(expected);
          if (before) expect(await snapshot()).toEqual(before);
        }

        async function invariants() {
          const accounts = await h.db.prisma.account.findMany();
          const byId = new Map(accounts.map((a) => [a.id, a]));
          const ids = await h.db.prisma.identifier.findMany({ where: { value: { in: pool.map((_, x) => value(x)) } } });
          // every identifier belongs to exactly one (existing) account
          expect(new Set(ids.map((i) => i.value)).size).toBe(ids.length);
          for (const i of ids) {
            const a = byId.get(i.accountId);
            expect(a).toBeDefined();
            // signing in with it lands on a primary: the account itself or, for a secondary, its partner
            const landing = a!.mergeRole === "secondary" ? byId.get(a!.mergedWithId!)! : a!;
            expect(landing.mergeRole).not.toBe("secondary");
          }
          // merges are symmetric, one per account: one primary, one secondary, pointing at each other
          const secondariesOf = new Map<string, number>();
          for (const a of accounts) {
            expect(a.mergeRole === null, a.id).toBe(a.mergedWithId === null);
            if (!a.mergedWithId) continue;
            const b = byId.get(a.mergedWithId)!;
            expect(b.mergedWithId).toBe(a.id);
            expect([a.mergeRole, b.mergeRole].sort()).toEqual(["primary", "secondary"]);
            if (a.mergeRole === "secondary") secondariesOf.set(b.id, (secondariesOf.get(b.id) ?? 0) + 1);
          }
          for (const n of secondariesOf.values()) expect(n).toBe(1);
          // and the database is the model
          const stored = Object.fromEntries(ids.map((i) => [i.value, `${i.accountId}:${i.origin}`]));
          const modelled = Object.fromEntries([...m.holder].map(([x, v]) => [value(x), `${v.acc}:${v.origin}`]));
          expect(stored, log.join("\n")).toEqual(modelled);
          for (const acc of new Set([...m.holder.values()].map((v) => v.acc))) {
            const a = byId.get(acc)!;
            expect({ with: a.mergedWithId, role: a.mergeRole }).toEqual({ with: m.partner.get(acc) ?? null, role: m.role.get(acc) ?? null });
          }
        }

        async function link(acc: string, x: number) {
          const token = m.tokens.get(acc)!;
          const tokensBefore = new Map(m.tokens);
          const expected = m.link(acc, x);
          if (expected === "CannotLinkSelf") return step(expected, () => post(token, "request", pool[x]));
          const req = await post(token, "request", pool[x]);
          expect(req.status, JSON.stringify(req.body)).toBe(200);
          const otp = await h.mailbox.otp(value(x));
          await step(expected, () => post(token, "verify", { state_id: req.body.state_id, otp }));
          const oldToken = expected === "merged" ? tokensBefore.get(m.partner.get(acc)!) : undefined;
          if (oldToken) {
            // the merge ended the secondary's sessions
            const info = await h.call("GET", "/oauth/userinfo", { headers: { authorization: `Bearer ${oldToken}` } });
            expect(info.status, log.join("\n")).toBe(401);
          }
        }

        for (const x of INITIAL) await signIn(x);
        for (const [from, to] of premerges) {
          log.push(JSON.stringify({ t: "premerge", from: value(from), to: value(to) }));
          await link(m.holder.get(from)!.acc, to);
        }
        await invariants();
        for (const a of acts) {
          const actors = m.actors();
          const acc = "who" in a ? actors[a.who % actors.length] : "";
          log.push(JSON.stringify({ ...a, acc, value: "x" in a ? value(a.x) : undefined }));
          if (a.t === "signIn") {
            await signIn(a.x);
          } else if (a.t === "link") {
            await link(acc, a.x);
          } else if (a.t === "remove") {
            const partner = m.partner.get(acc);
            await step(m.remove(acc, a.x), () => post(m.tokens.get(acc)!, "remove", pool[a.x]));
            if (partner && !m.partner.has(acc)) await bothSignInAlone(acc, partner);
          } else {
            const partner = m.partner.get(acc);
            await step(m.unmerge(acc), () => post(m.tokens.get(acc)!, "unmerge", {}));
            if (partner) await bothSignInAlone(acc, partner);
          }
          await invariants();
        }

        /** after an unmerge each side's own identifiers sign in to it again */
        async function bothSignInAlone(a: string, b: string) {
          for (const acc of [a, b]) {
            const x = m.idsOf(acc)[0];
            expect(await signIn(x), log.join("\n")).toBe(acc);
          }
        }
      }),
      // a failure is reported with the smallest counterexample found before the time limit
      { ...replay, numRuns: NUM_RUNS, interruptAfterTimeLimit: NUM_RUNS > 10 ? 1_800_000 : 45_000 },
    );
  }, 1_900_000);
});
