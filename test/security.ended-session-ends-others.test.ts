// Ending sessions with a session that has itself just ended. The owner, on one device, ends the
// other sessions (an intruder's among them); the intruder's own "end other sessions" (or
// endSession of the owner's), authenticated a moment before, was still under way. It ended the
// owner's session all the same, answering `ended: 1` to a session that no longer lived: a change
// made with an ended session, which writes nothing (docs/security.md, "Stolen sessions").
// Each now checks its own session live under the account's lock, as every other write does
// (lockForSession), and the loser is UNAUTHENTICATED.
// Postgres only: a second connection holds the account's and the owner's session's rows while the
// intruder's request comes to wait for one of them, ends the intruder's session as the owner's
// request would, and lets go.
import { describe, expect, it } from "vitest";
import { serverUrl } from "./support/db.ts";
import { harnessFor } from "./support/hooks.ts";
import { lockHolder, waitingForLock } from "./support/locks.ts";

const onPostgres = serverUrl ? describe : describe.skip;

onPostgres("ending sessions with a session ended meanwhile", () => {
  const h = harnessFor("postgres");
  const blocker = lockHolder(h);
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const sessionOf = (token: string) => JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()).sid as string;

  /** Sends `request` (the intruder's) while the owner's rows are held, ends the intruder's session meanwhile, then lets go. */
  async function endedWhileWaiting<T>(accountId: string, owner: string, intruder: string, request: () => Promise<T>): Promise<T> {
    await blocker.query("BEGIN");
    try {
      await blocker.query("SELECT id FROM accounts WHERE id = $1 FOR UPDATE", [accountId]);
      await blocker.query("SELECT id FROM sessions WHERE id = $1 FOR UPDATE", [owner]);
      const sent = request();
      await waitingForLock(blocker);
      await blocker.query("UPDATE sessions SET ended_at = now() WHERE id = $1", [intruder]);
      await blocker.query("COMMIT");
      return await sent;
    } finally {
      await blocker.query("ROLLBACK").catch(() => {});
    }
  }

  for (const [what, mutation] of [
    ["endOtherSessions", (_owner: string) => ({ query: `mutation { endOtherSessions { __typename } }`, variables: {} })],
    ["endSession of the owner's session", (owner: string) => ({ query: `mutation($id: ID!) { endSession(id: $id) { __typename } }`, variables: { id: owner } })],
  ] as const) {
    it(`${what} by a session that ended meanwhile ends nothing: UNAUTHENTICATED`, async () => {
      const email = `ended.ends.${what.length}@example.com`;
      const owner = await h.signIn({ email });
      const intruder = await h.signIn({ email });
      const [ownerSession, intruderSession] = [sessionOf(owner.token), sessionOf(intruder.token)];
      const { query, variables } = mutation(ownerSession);

      const answered = await endedWhileWaiting(owner.accountId, ownerSession, intruderSession, () => h.gql(query, variables, bearer(intruder.token)));

      expect(answered.body.errors?.[0]?.extensions?.code, JSON.stringify(answered.body)).toBe("UNAUTHENTICATED");
      expect(await h.db.prisma.session.findUnique({ where: { id: ownerSession }, select: { endedAt: true } })).toEqual({ endedAt: null });
      const viewer = await h.gql(`{ viewer { id } }`, {}, bearer(owner.token));
      expect(viewer.body.data?.viewer?.id, JSON.stringify(viewer.body)).toBe(owner.accountId);
    });
  }
});
