// The user object of events is written in two languages: userObject (src/auth/accounts.ts) for
// every event made in TypeScript, and link_user_object (src/linking/link-verify.sql) for the
// events link_verify writes in SQL. For any account both give the same object, keys in the same
// order, byte for byte; a sample event's user (src/webhooks/samples.ts) is made by userObject.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadAccount, userObject } from "../src/auth/accounts.ts";
import { newId } from "../src/ids.ts";
import { sampleEventData } from "../src/webhooks/samples.ts";
import { EVENT_TYPES } from "../src/webhooks/event-types.ts";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";

type IdentifierSpec = { kind: "email" | "phone"; origin: "own" | "attached"; ageMs: number };
type AccountSpec = {
  name: string | null;
  status: "active" | "disabled";
  lastLogin: boolean;
  identifiers: IdentifierSpec[];
};

const account: fc.Arbitrary<AccountSpec> = fc.record({
  // quotes, backslashes, control characters, non-ASCII: the JSON escaping of both languages
  name: fc.option(
    fc.array(fc.oneof(fc.constantFrom('"', "\\", "\n", "\t", "\u0001", "\u007f", "é", "😀", "</", "\u2028"), fc.string({ maxLength: 3 }))).map((a) => a.join("")),
    { nil: null },
  ),
  status: fc.constantFrom("active" as const, "disabled" as const),
  lastLogin: fc.boolean(),
  identifiers: fc.array(
    fc.record({
      kind: fc.constantFrom("email" as const, "phone" as const),
      origin: fc.constantFrom("own" as const, "attached" as const),
      ageMs: fc.nat(10_000),
    }),
    { maxLength: 4 },
  ),
});

describe.each(backends)("the user object of events on %s", (backend) => {
  let db: TestDatabase;
  const projectId = newId("prj");

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    await db.prisma.project.create({ data: { id: projectId, name: "user objects" } });
  });
  afterAll(async () => {
    await db?.close();
  });

  async function create(spec: AccountSpec): Promise<string> {
    const id = newId("acc");
    const now = Date.now();
    await db.prisma.account.create({
      data: {
        id,
        projectId,
        name: spec.name,
        status: spec.status,
        createdAt: new Date(now - 86_400_123),
        lastLoginAt: spec.lastLogin ? new Date(now - 3_600_007) : null,
        identifiers: {
          create: spec.identifiers.map((i, n) => ({
            id: newId("idt"),
            projectId,
            kind: i.kind,
            origin: i.origin,
            value: i.kind === "email" ? `u${n}.${id}@example.com` : `+1202555${n}.${id}`,
            createdAt: new Date(now - i.ageMs),
          })),
        },
      },
    });
    return id;
  }

  async function sqlUserObject(accountId: string): Promise<string> {
    const [row] = await db.prisma.$queryRaw<{ u: string }[]>`SELECT link_user_object(${accountId}) AS u`;
    return row.u;
  }

  it("link_user_object and userObject give the same JSON for any account", async () => {
    await fc.assert(
      fc.asyncProperty(account, async (spec) => {
        const id = await create(spec);
        const loaded = await loadAccount(db.prisma, projectId, id);
        expect(await sqlUserObject(id)).toBe(JSON.stringify(userObject(loaded!)));
      }),
      { numRuns: 40 },
    );
  });

  it("prefers the account's own e-mail to an older attached one, and has none without an e-mail", async () => {
    const both = await create({
      name: "Ada",
      status: "active",
      lastLogin: true,
      identifiers: [
        { kind: "email", origin: "attached", ageMs: 5_000 },
        { kind: "email", origin: "own", ageMs: 10 },
      ],
    });
    const phoneOnly = await create({ name: null, status: "active", lastLogin: false, identifiers: [{ kind: "phone", origin: "own", ageMs: 0 }] });
    const fromSql = JSON.parse(await sqlUserObject(both));
    expect(fromSql.email).toBe(`u1.${both}@example.com`);
    expect(fromSql).toEqual(userObject((await loadAccount(db.prisma, projectId, both))!));
    const none = JSON.parse(await sqlUserObject(phoneOnly));
    expect(none).toMatchObject({ email: null, name: null, last_login: null });
    expect(none).toEqual(userObject((await loadAccount(db.prisma, projectId, phoneOnly))!));
  });

  it("a sample event's user has the keys of the real user object, in its order", async () => {
    const id = await create({ name: "Grace", status: "active", lastLogin: true, identifiers: [{ kind: "email", origin: "own", ageMs: 0 }] });
    const keys = Object.keys(JSON.parse(await sqlUserObject(id)));
    for (const type of EVENT_TYPES) {
      const data = sampleEventData(projectId, type);
      if ("user" in data) expect(Object.keys(data.user as object), type).toEqual(keys);
    }
    // and the values docs/events.md gives each: no last sign-in yet in user.created, and the
    // fields an exhausted code's alarm carries
    expect(sampleEventData(projectId, "user.created").user).toMatchObject({ last_login: null });
    expect(sampleEventData(projectId, "user.updated").user).toMatchObject({ last_login: expect.any(String) });
    expect(Object.keys(sampleEventData(projectId, "security.suspicious_activity")).sort()).toEqual(["client_address", "purpose", "reason", "state_id", "user_id"]);
  });
});
