// The passkeys that sign into an account (GET /auth/passkey/list) are its own and its merged
// secondary's, and listing them reads those two accounts only. Written as "the passkey's account
// is this one OR that account's secondary is" across the join, no index could answer the OR and
// every passkey of the database was read per call: 3,000 rows here, and some 250 ms a call on
// Postgres with 200,000 passkeys (under 4 ms since), asked by any signed-in user as often as they
// liked. Counted from the table's statistics of the transaction itself, so the test does not
// depend on time (as test/auth.sign-in-identifiers.test.ts counts the identifiers a notice reads).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listPasskeys } from "../src/auth/passkeys.ts";
import type { Deps, UserActor } from "../src/deps.ts";
import { newId } from "../src/ids.ts";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";
import { seedPopulation } from "./support/population.ts";
import { withTableReads } from "./support/table-reads.ts";

const OTHER_ACCOUNTS = 3_000;

describe.each(backends)("listing the passkeys that sign into an account, on %s", (backend) => {
  let db: TestDatabase;
  const projectId = newId("prj");
  const primary = newId("acc");
  const secondary = newId("acc");
  const loner = newId("acc");
  const passkeyOf: Record<string, string> = {};

  const passkey = (accountId: string, credentialId: string) => ({
    id: newId("psk"),
    projectId,
    accountId,
    credentialId,
    publicKey: Buffer.alloc(1),
    transports: [],
    deviceType: "singleDevice",
    backedUp: false,
    name: credentialId,
  });

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    await db.prisma.project.create({ data: { id: projectId, name: "passkey lists" } });
    // Many other users, each with a passkey, so a read of every passkey cannot pass for a read of one account's.
    await seedPopulation(db, projectId, OTHER_ACCOUNTS);
    await db.prisma.$executeRaw`
      INSERT INTO passkeys (id, project_id, account_id, credential_id, public_key, transports, device_type, backed_up, name, created_at)
      SELECT 'psk_pop' || n, ${projectId}, 'acc_pop' || n, 'pop' || n, '\\x00'::bytea, '{}', 'singleDevice', false, 'Passkey', now()
      FROM generate_series(1, ${OTHER_ACCOUNTS}::int) n`;
    for (const id of [primary, secondary, loner]) {
      await db.prisma.account.create({ data: { id, projectId } });
      const created = await db.prisma.passkey.create({ data: passkey(id, `cred-${id}`) });
      passkeyOf[id] = created.id;
    }
    await db.prisma.account.update({ where: { id: primary }, data: { mergedWithId: secondary, mergeRole: "primary", mergedAt: new Date() } });
    await db.prisma.account.update({ where: { id: secondary }, data: { mergedWithId: primary, mergeRole: "secondary", mergedAt: new Date() } });
    await db.prisma.$executeRaw`ANALYZE accounts`;
    await db.prisma.$executeRaw`ANALYZE passkeys`;
  });
  afterAll(async () => {
    await db?.close();
  });

  /** What listPasskeys returns for `accountId`'s user, and what the call read from the passkeys table. */
  async function listWithCounts(accountId: string) {
    const actor: UserActor = { projectId, keyKind: "publishable", clientAddress: "192.0.2.1", user: { accountId, sessionId: "ses_x", authTime: new Date(), authAgeMs: 0 } };
    const { result, reads } = await withTableReads(db, "passkeys", (tx) => listPasskeys({ prisma: tx } as unknown as Deps, actor));
    return { own: result.own.map((p) => p.id), mergedSecondary: result.mergedSecondary.map((p) => p.id), reads };
  }

  it("a primary's are its own and its secondary's, read through those two accounts alone", async () => {
    const { own, mergedSecondary, reads } = await listWithCounts(primary);
    expect({ own, mergedSecondary }).toEqual({ own: [passkeyOf[primary]], mergedSecondary: [passkeyOf[secondary]] });
    expect(reads.seq_scan).toBe(0);
    expect(reads.rows_read).toBeLessThanOrEqual(10);
  });

  it("an unmerged account's are its own, read through its account alone", async () => {
    const { own, mergedSecondary, reads } = await listWithCounts(loner);
    expect({ own, mergedSecondary }).toEqual({ own: [passkeyOf[loner]], mergedSecondary: [] });
    expect(reads.seq_scan).toBe(0);
    expect(reads.rows_read).toBeLessThanOrEqual(10);
  });

  it("a merged secondary's are its own only: the list never reaches up to its primary's", async () => {
    const { own, mergedSecondary } = await listWithCounts(secondary);
    expect({ own, mergedSecondary }).toEqual({ own: [passkeyOf[secondary]], mergedSecondary: [] });
  });
});
