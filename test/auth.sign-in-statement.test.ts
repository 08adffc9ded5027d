// An OTP sign-in's verify is decided in one statement (src/auth/sign-in.sql sign_in_verify).
// What it writes must read exactly as the TypeScript it replaced wrote it: the user object of
// its events byte for byte as userObject makes it (test/linking.user-object.test.ts compares the
// SQL and TypeScript user objects in general), the envelope's keys in envelope()'s order, and
// the ID token's claims as userinfo (oidcClaims) gives them. On Postgres, the statements a
// verify sends are counted at the driver: the API key, then the verify.
import { decodeJwt } from "jose";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadAccount, oidcClaims, userObject } from "../src/auth/accounts.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

let counting = false;
let statements: string[] = [];
/** What the notice sender and the retention sweep may send meanwhile, on their own timers. */
const BACKGROUND = /\bnotices\b|pg_try_advisory_xact_lock|DELETE FROM/;
const clientQuery = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  if (counting) {
    const q = args[0] as string | { name?: string; text: string };
    const text = typeof q === "string" ? q : q.text;
    // a prepared statement by its label (src/db/fast.ts names it lg_<label>_<hash>)
    if (!BACKGROUND.test(text)) statements.push(typeof q === "object" && q.name ? q.name.replace(/^lg_(.*)_[0-9a-f]{12}$/, "$1") : text);
  }
  return (clientQuery as (...a: unknown[]) => unknown).apply(this, args);
} as typeof clientQuery;
const ONE_VERIFY = ["authenticate_project", "sign_in_verify"];

describe.each(backends)("a sign-in verify in one statement on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());
  afterEach(() => {
    counting = false;
    statements = [];
  });

  /** Starts a sign-in and verifies it, counting the verify's statements. */
  async function signIn(identifier: { email: string } | { phone: string }) {
    const start = await h.call("POST", "/auth/otp/start", { body: identifier });
    const otp = await h.mailbox.otp("email" in identifier ? identifier.email : identifier.phone);
    statements = [];
    counting = true;
    const verify = await h.call("POST", "/auth/otp/verify", { body: { state_id: start.body.state_id, otp } });
    counting = false;
    expect(verify.status).toBe(200);
    return verify.body as { account_id: string; id_token: string; access_token: string };
  }

  async function eventsOf(accountId: string) {
    const rows = await h.db.prisma.outboxEvent.findMany({ where: { projectId: h.projectId, body: { contains: accountId } }, orderBy: { seq: "asc" } });
    return rows.map((r) => ({ id: r.id, type: r.eventType, body: r.body }));
  }

  it("a new user: user.created with the account as created, then user.authentication.success with it as now, byte for byte", async () => {
    const tokens = await signIn({ email: "bytes@example.com" });
    if (backend === "postgres") expect(statements).toEqual(ONE_VERIFY);
    const account = (await loadAccount(h.db.prisma, h.projectId, tokens.account_id))!;
    const now = JSON.stringify(userObject(account));
    const asCreated = JSON.stringify({ ...userObject(account), last_login: null });
    expect(account.lastLoginAt).not.toBeNull();
    expect(account.updatedAt.getTime()).toBe(account.createdAt.getTime());

    const events = await eventsOf(tokens.account_id);
    expect(events.map((e) => e.type)).toEqual(["user.created", "user.authentication.success"]);
    const [created, success] = events.map((e) => JSON.parse(e.body));
    expect(Object.keys(created)).toEqual(["id", "event_type", "created_at", "project_id", "data"]);
    expect(created.id).toBe(events[0].id);
    expect(success.id).toBe(events[1].id);
    expect(events[0].body).toContain(`"data":{"user":${asCreated}}`);
    expect(events[1].body).toContain(`"data":{"user":${now},"method":"otp","identifier_type":"email"}`);

    // the ID token carries what userinfo (oidcClaims over Prisma) says
    const claims = decodeJwt(tokens.id_token);
    const info = oidcClaims(account);
    for (const [k, v] of Object.entries(info)) if (k !== "sub") expect(claims[k]).toEqual(v);
    expect(claims).toMatchObject({ sub: tokens.account_id, amr: ["otp"], token_use: "id" });
  });

  it("a returning user with a phone: one event, the claims of both identifiers, the same number of statements", async () => {
    const first = await signIn({ phone: "+12025550199" });
    const again = await signIn({ phone: "+12025550199" });
    if (backend === "postgres") expect(statements).toEqual(ONE_VERIFY);
    expect(again.account_id).toBe(first.account_id);
    const account = (await loadAccount(h.db.prisma, h.projectId, again.account_id))!;
    const events = await eventsOf(again.account_id);
    expect(events.map((e) => e.type)).toEqual(["user.created", "user.authentication.success", "user.authentication.success"]);
    expect(events[2].body).toContain(`"data":{"user":${JSON.stringify(userObject(account))},"method":"otp","identifier_type":"phone"}`);
    const claims = decodeJwt(again.id_token);
    expect(claims).toMatchObject({ phone_number: "+12025550199", phone_number_verified: true, updated_at: oidcClaims(account).updated_at });
    expect(claims.email).toBeUndefined();
  });

  it("a retried verify answers the same sign-in in one statement, and writes nothing", async () => {
    const start = await h.call("POST", "/auth/otp/start", { body: { email: "retry-one@example.com" } });
    const body = { state_id: start.body.state_id, otp: await h.mailbox.otp("retry-one@example.com") };
    const first = await h.call("POST", "/auth/otp/verify", { body });
    const before = await eventsOf(first.body.account_id);
    counting = true;
    const again = await h.call("POST", "/auth/otp/verify", { body });
    counting = false;
    if (backend === "postgres") expect(statements).toEqual(ONE_VERIFY);
    expect(again.status).toBe(200);
    expect(decodeJwt(again.body.access_token).sid).toBe(decodeJwt(first.body.access_token).sid);
    expect(decodeJwt(again.body.id_token)).toMatchObject({ email: "retry-one@example.com", auth_time: decodeJwt(first.body.id_token).auth_time });
    expect(await eventsOf(first.body.account_id)).toEqual(before);
  });
});
