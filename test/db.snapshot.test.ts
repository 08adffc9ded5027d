// The snapshot behind every "a rejected request changes nothing" (test/support/db-snapshot.ts):
// it must see every change to a row, and only skips hashing again while the write-ahead log
// has not moved. A snapshot that missed changes would let the fuzzing pass anything.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends, openTestDatabase, type TestDatabase } from "./support/db.ts";
import { dbSnapshot } from "./support/db-snapshot.ts";

describe.each(backends)("the database snapshot on %s", (backend) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await openTestDatabase(backend);
  });
  afterAll(async () => {
    await db?.close();
  });

  it("is the same while nothing is written, and sees an insert, an update and a delete", async () => {
    const start = await dbSnapshot(db);
    expect(await dbSnapshot(db)).toEqual(start);

    await db.prisma.project.create({ data: { id: "prj_snapshot_test_0000001", name: "Before" } });
    const inserted = await dbSnapshot(db);
    expect(inserted.projects.rows).toBe(start.projects.rows + 1);

    await db.prisma.project.update({ where: { id: "prj_snapshot_test_0000001" }, data: { name: "After" } });
    const updated = await dbSnapshot(db);
    expect(updated.projects.rows).toBe(inserted.projects.rows);
    expect(updated.projects.hash).not.toBe(inserted.projects.hash);

    await db.prisma.project.delete({ where: { id: "prj_snapshot_test_0000001" } });
    expect(await dbSnapshot(db)).toEqual(start);
  });

  it("leaves out what a refused request may still move: rate-limit counters", async () => {
    const start = await dbSnapshot(db);
    await db.prisma.rateLimit.create({ data: { key: "snapshot-test", windowStart: new Date(), count: 1 } });
    expect(await dbSnapshot(db)).toEqual(start);
  });
});
