// Who gets a security notice reads only the account at hand: its own identifiers and its merged
// secondary's (src/auth/sign-in-identifiers.sql). Written as an OR across the join, as it once
// was, every identifier of every project was read on each passkey change, removal and link:
// linear in the number of users. Counted from the table's statistics of the transaction
// itself, so the test does not depend on time.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signInIdentifiers } from "../src/auth/change-notices.ts";
import { newId } from "../src/ids.ts";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";
import { seedPopulation } from "./support/population.ts";
import { withTableReads } from "./support/table-reads.ts";

const OTHER_ACCOUNTS = 3_000;

describe.each(backends)("the identifiers that sign into an account, on %s", (backend) => {
  let db: TestDatabase;
  const projectId = newId("prj");
  const primary = newId("acc");
  const secondary = newId("acc");
  const loner = newId("acc");

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    await db.prisma.project.create({ data: { id: projectId, name: "notices" } });
    // Many other users, so a read of everything cannot pass for a read of one account.
    await seedPopulation(db, projectId, OTHER_ACCOUNTS);
    for (const [id, value, kind] of [
      [primary, "primary@example.com", "email"],
      [secondary, "+12025550100", "phone"],
      [loner, "loner@example.com", "email"],
    ] as const) {
      await db.prisma.account.create({
        data: { id, projectId, identifiers: { create: { id: newId("idt"), projectId, kind, value, origin: "own" } } },
      });
    }
    await db.prisma.identifier.create({ data: { id: newId("idt"), projectId, accountId: primary, kind: "phone", value: "+12025550101", origin: "attached" } });
    await db.prisma.account.update({ where: { id: primary }, data: { mergedWithId: secondary, mergeRole: "primary", mergedAt: new Date() } });
    await db.prisma.account.update({ where: { id: secondary }, data: { mergedWithId: primary, mergeRole: "secondary", mergedAt: new Date() } });
    await db.prisma.$executeRaw`ANALYZE accounts`;
  });
  afterAll(async () => {
    await db?.close();
  });

  /** The identifiers signInIdentifiers returns, and what the call read from the identifiers table. */
  async function readWithCounts(accountId: string) {
    const { result, reads } = await withTableReads(db, "identifiers", (tx) => signInIdentifiers(tx, accountId));
    return { values: result.map((i) => `${i.kind}:${i.value}`).sort(), reads };
  }

  it("a primary's are its own, its attached ones and its secondary's; nobody else's", async () => {
    const { values, reads } = await readWithCounts(primary);
    expect(values).toEqual(["email:primary@example.com", "phone:+12025550100", "phone:+12025550101"]);
    expect(reads.seq_scan).toBe(0);
    expect(reads.rows_read).toBeLessThanOrEqual(10);
  });

  it("a secondary's are its own only (it signs into its primary, whose notices these are not)", async () => {
    expect((await readWithCounts(secondary)).values).toEqual(["phone:+12025550100"]);
  });

  it("an unmerged account's are its own, read through its account alone", async () => {
    const { values, reads } = await readWithCounts(loner);
    expect(values).toEqual(["email:loner@example.com"]);
    expect(reads.seq_scan).toBe(0);
    expect(reads.rows_read).toBeLessThanOrEqual(10);
  });
});
