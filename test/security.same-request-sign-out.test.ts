// One GraphQL document, several mutations (31st review): its credentials were read once per
// request, so the fields after a `signOut` still ran on the ended session: `requestLink` sent a
// code, `endOtherSessions` ended the owner's other sessions, `startPasskeyRegistration` gave
// creation options. Each root mutation field now reads them afresh (src/graphql/schema/index.ts).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

describe.each(backends)("mutations after signOut in the same document, on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  it.each([
    ["requestLink", `requestLink(email: "after-sign-out@example.com") { __typename }`],
    ["endOtherSessions", `endOtherSessions { __typename }`],
    ["startPasskeyRegistration", `startPasskeyRegistration { __typename }`],
    ["startReauthentication", `startReauthentication(email: "EMAIL") { __typename }`],
  ])("%s is UNAUTHENTICATED, and does nothing", async (name, field) => {
    const email = `same-request-${name.toLowerCase()}@example.com`;
    const elsewhere = await h.signIn({ email });
    const user = await h.signIn({ email });
    const sent = h.mailbox.messages.length;
    const r = await h.gql(`mutation { signOut second: ${field.replace("EMAIL", email)} }`, {}, bearer(user.token));
    // the second field's result is non-null, so its error takes `data` with it; signOut ran
    expect(r.body.errors, JSON.stringify(r.body)).toEqual([expect.objectContaining({ path: ["second"], extensions: expect.objectContaining({ code: "UNAUTHENTICATED" }) })]);
    expect((await h.gql(`{ viewer { id } }`, {}, bearer(user.token))).body.errors?.[0]?.extensions?.code).toBe("UNAUTHENTICATED");
    expect(h.mailbox.messages.length).toBe(sent);
    // the other session lives on
    expect((await h.gql(`{ viewer { id } }`, {}, bearer(elsewhere.token))).body.data?.viewer?.id).toBe(elsewhere.accountId);
  });

  it("a document whose mutations keep the session runs them all", async () => {
    const user = await h.signIn({ email: "same-request-ok@example.com" });
    const r = await h.gql(`mutation { a: updateProfile(name: "A") { __typename } b: updateProfile(name: "B") { __typename } }`, {}, bearer(user.token));
    expect(r.body.errors, JSON.stringify(r.body)).toBeUndefined();
  });
});
