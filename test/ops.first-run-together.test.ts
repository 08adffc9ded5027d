// Gateways starting at once on a new database (31st review): each found no signing key and made
// its own, so one gateway's tokens were refused by the others (401) until every gateway
// restarted; with LINKGATE_BOOTSTRAP_API_KEY, all but one crashed on the key's uniqueness with a
// stack trace. What a first start creates is now checked and created in the first-run turn
// (src/db/locks.ts), one process after another. Here the starts' steps run side by side in one
// process, on separate connections, as separate processes' would.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { bootstrapProject, newApiKey } from "../src/auth/projects.ts";
import { openKeyStore } from "../src/auth/tokens.ts";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";
import { newMasterKey } from "./support/receiver.ts";

describe.each(backends)("first starts at once on %s", (backend) => {
  let db: TestDatabase;
  beforeEach(async () => {
    db = await openTestDatabase(backend);
    await db.prisma.signingKey.deleteMany();
  });
  afterEach(() => db?.close());

  it("make one signing key, which every gateway publishes and signs with", async () => {
    const master = newMasterKey();
    const stores = await Promise.all([1, 2, 3].map(() => openKeyStore(db.prisma, master, "http://localhost:4000")));
    expect(await db.prisma.signingKey.count()).toBe(1);
    const published = stores.map((s) => s.jwks().keys.map((k) => k.kid));
    expect(new Set(published.map((kids) => kids.join()))).toEqual(new Set([published[0].join()]));
  });

  it("with bootstrap keys, make one project holding them, and none fails", async () => {
    const keys = { secret: newApiKey("secret"), publishable: newApiKey("publishable") };
    const made = await Promise.allSettled([1, 2, 3].map(() => bootstrapProject(db.prisma, keys, { secretKey: true })));
    expect(made.map((m) => m.status)).toEqual(["fulfilled", "fulfilled", "fulfilled"]);
    expect(await db.prisma.project.count({ where: { name: "default" } })).toBe(1);
    expect(await db.prisma.apiKey.count()).toBe(2);
  });

  it("without bootstrap keys, make one project and show its keys once", async () => {
    const made = await Promise.all([1, 2, 3].map(() => bootstrapProject(db.prisma, {}, { secretKey: true })));
    expect(made.filter((m) => m !== null)).toHaveLength(1);
    expect(await db.prisma.project.count()).toBe(1);
  });
});
