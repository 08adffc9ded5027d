// Support staff's unmergeAccount (the dashboard, with the project's secret key) racing the
// user's own changes to the pair it names: it read the two accounts, then came to lock them
// while the user unmerged and merged them the other way round, or unmerged and deleted one of
// them. The answer is decided from the pair as it is under the locks: the accounts merged with
// each other (in either role) are separated, a deleted one is NotFound, a pair no longer merged
// is NotMerged (docs/graphql.md, unmergeAccount). Before, the staff's call answered
// UNAUTHENTICATED ("this session has ended", "this account no longer exists"), as if their
// secret key had been refused.
// Postgres only: a second connection makes the user's change, holding the accounts' locks until
// the staff's request waits for them.
import pg from "pg";
import { describe, expect, it } from "vitest";
import { serverUrl } from "./support/db.ts";
import { harnessFor } from "./support/hooks.ts";
import { committedUnder, lockHolder, waitingForLock } from "./support/locks.ts";

const onPostgres = serverUrl ? describe : describe.skip;

const UNMERGE = `mutation($a: ID!, $b: ID!) { unmergeAccount(accountId: $a, partnerId: $b) {
  __typename ... on UnmergeAccountPayload { message primaryId secondaryId } ... on Error { message } } }`;

onPostgres("support staff's unmergeAccount racing the user's own changes to the pair", () => {
  const h = harnessFor("postgres");
  const blocker: pg.Client = lockHolder(h);
  let n = 0;
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  /** Two accounts, `primary`'s user having merged `secondary` by linking its phone. */
  async function mergedPair() {
    const i = ++n;
    const phone = `+1202555${String(7100 + i).padStart(4, "0")}`;
    const primary = await h.signIn({ email: `support-race-${i}@example.com` });
    const secondary = await h.signIn({ phone });
    const start = await h.call("POST", "/users/link/request", { body: { phone }, headers: bearer(primary.token) });
    expect(start.status, JSON.stringify(start.body)).toBe(200);
    const verify = await h.call("POST", "/users/link/verify", { body: { state_id: start.body.state_id, otp: await h.mailbox.otp(phone) }, headers: bearer(primary.token) });
    expect(verify.body.outcome, JSON.stringify(verify.body)).toBe("merged");
    return { primary: primary.accountId, secondary: secondary.accountId };
  }

  const merge = (rows: Array<{ id: string; partner: string | null; role: string | null }>) =>
    rows.map((r) => ({ id: r.id, partner: r.partner, role: r.role }));

  it("the pair merged the other way round meanwhile: it is separated, the roles named as they are now", async () => {
    const { primary, secondary } = await mergedPair();
    // the user unmerged, and the former secondary's user merged the former primary into theirs
    const answer = await committedUnder(
      blocker,
      `UPDATE accounts SET merge_role = (CASE WHEN id = $1 THEN 'secondary' ELSE 'primary' END)::merge_role WHERE id IN ($1, $2)`,
      [primary, secondary],
      () => h.gql(UNMERGE, { a: primary, b: secondary }),
    );
    expect(answer.body.errors, JSON.stringify(answer.body)).toBeUndefined();
    expect(answer.body.data.unmergeAccount).toEqual({
      __typename: "UnmergeAccountPayload",
      message: "Accounts unmerged successfully",
      primaryId: secondary,
      secondaryId: primary,
    });
    const rows = await h.db.prisma.$queryRaw<Array<{ id: string; partner: string | null; role: string | null }>>`
      SELECT id, merged_with_id AS partner, merge_role::text AS role FROM accounts WHERE id IN (${primary}, ${secondary}) ORDER BY id`;
    expect(merge(rows).every((r) => r.partner === null && r.role === null)).toBe(true);
    const unmerged = await h.db.prisma.outboxEvent.findMany({ where: { eventType: "user.unmerged" }, orderBy: { seq: "desc" }, take: 1 });
    expect(JSON.parse(unmerged[0].body).data).toMatchObject({ primary_user_id: secondary, secondary_user_id: primary, by: "support" });
  });

  it("one of the pair unmerged and deleted meanwhile: NotFound, nothing else changed", async () => {
    const { primary, secondary } = await mergedPair();
    const before = await h.db.prisma.outboxEvent.count();
    // the user unmerged, then deleted the former primary
    await blocker.query("BEGIN");
    let answer;
    try {
      await blocker.query("UPDATE accounts SET merged_with_id = NULL, merge_role = NULL, merged_at = NULL WHERE id IN ($1, $2)", [primary, secondary]);
      await blocker.query("DELETE FROM accounts WHERE id = $1", [primary]);
      const sent = h.gql(UNMERGE, { a: secondary, b: primary });
      await waitingForLock(blocker, 1);
      await blocker.query("COMMIT");
      answer = await sent;
    } finally {
      await blocker.query("ROLLBACK").catch(() => {});
    }
    expect(answer.body.errors, JSON.stringify(answer.body)).toBeUndefined();
    expect(answer.body.data.unmergeAccount).toEqual({ __typename: "NotFound", message: "no such account" });
    expect(await h.db.prisma.outboxEvent.count()).toBe(before);
  });
});
