// What a project may hold only so many of (webhooks, identity providers) is counted and added
// under the project's row lock (src/db/locks.ts, lockProject). That lock must keep two adds from
// both taking the last place without holding up the project's users: every new account, session
// and identifier checks its foreign key to the project, and a lock that conflicts with that check
// made every sign-in of the project wait for a webhook's or a provider's add to commit.
import { describe, expect, it } from "vitest";
import { createProvider } from "../src/auth/external/providers.ts";
import { lockProject } from "../src/db/locks.ts";
import { Unauthenticated } from "../src/errors.ts";
import { createWebhook } from "../src/webhooks/service.ts";
import { backends, serverUrl } from "./support/db.ts";
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

describe.each(backends)("an add to a project deleted after its key was checked, on %s", (backend) => {
  const h = harnessFor(backend);
  it("is Unauthenticated, as the key now is, not a fault of the foreign key", async () => {
    const actor = { projectId: h.projectId, keyKind: "secret", clientAddress: "127.0.0.1", apiKeyId: "key_checked_before" } as const;
    await h.db.prisma.project.delete({ where: { id: h.projectId } });
    await expect(createWebhook(h.app.deps, actor, { url: "http://127.0.0.1:9/hook", events: ["user.created"] })).rejects.toBeInstanceOf(Unauthenticated);
    await expect(createProvider(h.app.deps, actor, { preset: "oidc", slug: "gone", issuer: "http://127.0.0.1:9/realm", clientId: "c" })).rejects.toBeInstanceOf(Unauthenticated);
    expect(await h.db.prisma.webhook.count()).toBe(0);
    expect(await h.db.prisma.identityProvider.count()).toBe(0);
  });
});
