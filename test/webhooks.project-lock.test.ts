// What a project may hold only so many of (webhooks, identity providers) is counted and added
// under the project's row lock (src/db/locks.ts, lockProject). That lock must keep two adds from
// both taking the last place without holding up the project's users: every new account, session
// and identifier checks its foreign key to the project, and a lock that conflicts with that check
// made every sign-in of the project wait for a webhook's or a provider's add to commit.
import { describe, expect, it } from "vitest";
import { lockProject } from "../src/db/locks.ts";
import { serverUrl } from "./support/db.ts";
import { harnessFor } from "./support/hooks.ts";
import { lockHolder, waitingForLock } from "./support/locks.ts";

// a wait for a row lock is seen in pg_stat_activity, which PGlite (one connection) has no use for
const onPostgres = serverUrl ? describe : describe.skip;

onPostgres("the project's lock for counting what it holds", () => {
  const h = harnessFor("postgres");
  const observer = lockHolder(h);

  /** An add in progress: the project's lock taken in a transaction that waits for `release`. */
  async function addInProgress(): Promise<{ release: () => Promise<void> }> {
    let release!: () => void;
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const adding = h.db.prisma.$transaction(
      async (tx) => {
        await lockProject(tx, h.projectId);
        locked();
        await new Promise<void>((r) => (release = r));
      },
      { timeout: 60_000 },
    );
    await isLocked;
    return {
      release: () => {
        release();
        return adding;
      },
    };
  }

  it("lets a new user of the project sign in while a webhook or provider is being added", async () => {
    const adding = await addInProgress();
    const signIn = h.signIn({ email: "new.while.adding@example.com" });
    const first = await Promise.race([signIn.then(() => "signed in"), waitingForLock(observer).then(() => "waited for the add")]);
    await adding.release();
    await signIn;
    expect(first).toBe("signed in");
  });

  it("still makes a second add wait for the first", async () => {
    const first = await addInProgress();
    const second = h.db.prisma.$transaction((tx) => lockProject(tx, h.projectId), { timeout: 60_000 });
    await waitingForLock(observer);
    await Promise.all([first.release(), second]);
  });
});
