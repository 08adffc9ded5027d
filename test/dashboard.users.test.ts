// The dashboard's users view and event lookup through GraphQL, on PGlite and Postgres: support
// staff find an account by e-mail, phone or id and see its identifiers, merge partner, passkeys,
// sessions and recent events with their deliveries; end its sessions; unmerge it for its user
// with the events a user's own unmerge emits plus who did it, and no recent sign-in asked for.
// Secret key only, and another project's account or event is answered exactly like none.
import { sha256Hex } from "../src/crypto.ts";
import { newId } from "../src/ids.ts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { backends } from "./support/db.ts";

const ORIGIN = "http://localhost:4000"; // the harness's relying party

const ACCOUNT = `id name email status mergeRole mergedAt createdAt lastLoginAt
  identifiers { kind value origin }
  mergePartner { id mergeRole identifiers { kind value origin } }
  passkeys { id name deviceType }
  sessions { id createdAt lastUsedAt clientAddress userAgent expiresAt }
  recentEvents(first: 20) { id eventType createdAt body deliveries { status attempts webhook { id url } } }`;

const Q = {
  lookup: `query($email: String, $phone: String, $accountId: ID) {
    lookupAccount(email: $email, phone: $phone, accountId: $accountId) {
      __typename ... on AccountLookup { account { ${ACCOUNT} } } ... on Error { message } } }`,
  event: `query($id: ID!, $webhookId: ID) { event(id: $id) { id eventType test body deliveries(webhookId: $webhookId) { id status webhook { id url } } } }`,
  endSessions: `mutation($id: ID!) { endAccountSessions(accountId: $id) { __typename ... on EndAccountSessionsPayload { ended } ... on Error { message } } }`,
  unmerge: `mutation($a: ID!, $b: ID!) { unmergeAccount(accountId: $a, partnerId: $b) {
    __typename ... on UnmergeAccountPayload { message primaryId secondaryId } ... on Error { message } } }`,
  userUnmerge: `mutation { unmerge { __typename ... on MessagePayload { message } ... on Error { message } } }`,
  viewer: `{ viewer { id } }`,
};

type User = { token: string; accountId: string };

describe.each(backends)("the dashboard's users view on %s", (backend) => {
  let h: Harness;
  let otherKey: Record<string, string>;
  let webhookId = "";
  let ada: User;
  let bob: User;
  const adaEmail = `ada-${backend}@example.com`;
  const adaPhone = "+12025550101"; // attached to Ada by linking: nobody had it
  const bobPhone = "+12025550102"; // Bob signed up with it; linking it merges Bob into Ada

  const bearer = (u: User) => ({ authorization: `Bearer ${u.token}` });

  async function link(u: User, phone: string) {
    const start = await h.call("POST", "/users/link/request", { body: { phone }, headers: bearer(u) });
    expect(start.status, JSON.stringify(start.body)).toBe(200);
    const verify = await h.call("POST", "/users/link/verify", { body: { state_id: start.body.state_id, otp: await h.mailbox.otp(phone) }, headers: bearer(u) });
    expect(verify.status, JSON.stringify(verify.body)).toBe(200);
    return verify.body.outcome as string;
  }

  const data = async (query: string, variables: Record<string, unknown> = {}, headers?: Record<string, string>) => {
    const r = await h.gql(query, variables, headers);
    expect(r.body.errors, JSON.stringify(r.body.errors)).toBeUndefined();
    return r.body.data;
  };
  const lookup = async (by: Record<string, string>, headers?: Record<string, string>) => (await data(Q.lookup, by, headers)).lookupAccount;
  const events = async (accountId: string) =>
    (await h.db.prisma.outboxEvent.findMany({ where: { body: { contains: accountId } }, orderBy: { seq: "asc" } })).map((e) => ({
      type: e.eventType,
      data: JSON.parse(e.body).data,
    }));

  beforeAll(async () => {
    h = await startHarness(backend);
    const hook = await h.gql(`mutation { createWebhook(input: { url: "http://127.0.0.1:9/hook", events: ["user.created", "user.merged", "user.unmerged", "user.updated"] }) {
      ... on CreateWebhookPayload { webhook { id } } } }`);
    webhookId = hook.body.data.createWebhook.webhook.id;
    const other = await h.gql(`mutation { createProject(name: "other") { ... on CreateProjectPayload { secretKey } } }`, {}, { "x-admin-token": h.adminToken });
    otherKey = { "x-api-key": other.body.data.createProject.secretKey };

    ada = await h.signIn({ email: adaEmail });
    bob = await h.signIn({ phone: bobPhone });
    expect(await link(ada, adaPhone)).toBe("attached");
    expect(await link(ada, bobPhone)).toBe("merged");
    // A passkey of Ada's, registered as a browser would.
    const opts = await h.gql(`mutation { startPasskeyRegistration { ... on PasskeyCreationOptions { options } } }`, {}, bearer(ada));
    const response = new SoftAuthenticator(ORIGIN).create(opts.body.data.startPasskeyRegistration.options);
    const done = await h.gql(`mutation($r: JSON!) { finishPasskeyRegistration(response: $r, name: "Laptop") { __typename } }`, { r: response }, bearer(ada));
    expect(done.body.data.finishPasskeyRegistration.__typename).toBe("Passkey");
  });
  afterAll(() => h?.close());

  it("finds an account by e-mail (any case), phone (any spelling) or id, with all support needs to see", async () => {
    const byEmail = await lookup({ email: `  ${adaEmail.toUpperCase()} ` });
    expect(byEmail.__typename).toBe("AccountLookup");
    const a = byEmail.account;
    expect(a).toMatchObject({ id: ada.accountId, email: adaEmail, status: "active", mergeRole: "primary", mergedAt: expect.any(String) });
    expect(a.identifiers).toEqual([
      { kind: "email", value: adaEmail, origin: "own" },
      { kind: "phone", value: adaPhone, origin: "attached" },
    ]);
    expect(a.mergePartner).toEqual({ id: bob.accountId, mergeRole: "secondary", identifiers: [{ kind: "phone", value: bobPhone, origin: "own" }] });
    expect(a.passkeys).toEqual([{ id: expect.stringMatching(/^psk_/), name: "Laptop", deviceType: expect.any(String) }]);
    expect(a.sessions.length).toBeGreaterThanOrEqual(1);
    expect(a.sessions.every((s: { expiresAt: string }) => Date.parse(s.expiresAt) > Date.now())).toBe(true);

    // Newest first, from the passkey back to the sign-up; each event with its delivery to the
    // webhook when the webhook takes its type.
    const types = a.recentEvents.map((e: { eventType: string }) => e.eventType);
    expect(types[0]).toBe("user.passkey.registered");
    expect(types).toContain("user.merged");
    expect(types).toContain("user.identifier.linked");
    expect(types.at(-1)).toBe("user.created");
    const merged = a.recentEvents.find((e: { eventType: string }) => e.eventType === "user.merged");
    expect(merged.deliveries).toEqual([{ status: "pending", attempts: 0, webhook: { id: webhookId, url: "http://127.0.0.1:9/hook" } }]);
    expect(JSON.parse(merged.body).data).toMatchObject({ primary_user_id: ada.accountId, secondary_user_id: bob.accountId });
    const stored = await h.db.prisma.outboxEvent.findUniqueOrThrow({ where: { id: merged.id } });
    expect(merged.body).toBe(stored.body);
    const linked = a.recentEvents.find((e: { eventType: string }) => e.eventType === "user.identifier.linked");
    expect(linked.deliveries).toEqual([]); // the webhook does not take that type
    const seqs = await h.db.prisma.outboxEvent.findMany({ where: { id: { in: a.recentEvents.map((e: { id: string }) => e.id) } }, select: { id: true, seq: true } });
    const seqOf = new Map(seqs.map((s) => [s.id, s.seq]));
    const order = a.recentEvents.map((e: { id: string }) => seqOf.get(e.id)!);
    expect([...order].sort((x, y) => (x > y ? -1 : 1))).toEqual(order);

    // Bob's phone finds Bob, the secondary; his events include the merge that names him.
    const b = (await lookup({ phone: "+1 (202) 555-0102" })).account;
    expect(b).toMatchObject({ id: bob.accountId, mergeRole: "secondary", mergePartner: { id: ada.accountId, mergeRole: "primary" } });
    expect(b.identifiers).toEqual([{ kind: "phone", value: bobPhone, origin: "own" }]);
    expect(b.sessions).toEqual([]); // a merge ends the secondary's sessions
    expect(b.recentEvents.map((e: { eventType: string }) => e.eventType)).toEqual(expect.arrayContaining(["user.merged", "user.created"]));

    expect((await lookup({ accountId: ada.accountId })).account.id).toBe(ada.accountId);
    expect((await lookup({ phone: adaPhone })).account.id).toBe(ada.accountId);
    expect((await lookup({ email: "nobody@example.com" })).account).toBeNull();
    expect((await lookup({ accountId: "acc_nobody" })).account).toBeNull();
    expect((await lookup({ accountId: "not an id" })).account).toBeNull();
  });

  // support types the address as the user spells it: a domain in Unicode was "not a valid
  // e-mail address", and the account signed up with its punycode was not found
  it("finds an account by an e-mail whose domain is written in Unicode or in punycode", async () => {
    const ida = await h.signIn({ email: `ida-${backend}@xn--bcher-kva.example` });
    expect((await lookup({ email: `Ida-${backend}@Bücher.example` })).account).toMatchObject({ id: ida.accountId, email: `ida-${backend}@xn--bcher-kva.example` });
    expect((await lookup({ email: `ida-${backend}@xn--bcher-kva.example` })).account.id).toBe(ida.accountId);
  });

  // Mexico dropped the mobile "1" in 2019 (+52 1 55… is no valid number now): a number proven
  // before was refused as InvalidIdentifier, and support could not find its account by it
  it("finds an account by a number it holds that is no longer valid (its numbering plan changed)", async () => {
    const held = await h.signIn({ email: `plan-${backend}@example.com` });
    await h.db.prisma.identifier.create({ data: { id: newId("idt"), projectId: h.projectId, accountId: held.accountId, kind: "phone", value: "+5215512345678", origin: "attached" } });
    expect((await lookup({ phone: "+52 1 55 1234 5678" })).account?.id).toBe(held.accountId);
    expect((await lookup({ phone: "+5215512345679" })).account).toBeNull();
    expect((await lookup({ phone: "+52 1 55 abc" })).__typename).toBe("InvalidIdentifier");
  });

  it("bounds recentEvents and refuses lookups that name no account, or two", async () => {
    const few = await data(`query($id: ID) { lookupAccount(accountId: $id) { ... on AccountLookup { account { recentEvents(first: 2) { id } } } } }`, { id: ada.accountId });
    expect(few.lookupAccount.account.recentEvents).toHaveLength(2);
    for (const first of [0, 51]) {
      const refused = await h.gql(`query($id: ID, $first: Int) { lookupAccount(accountId: $id) { ... on AccountLookup { account { recentEvents(first: $first) { id } } } } }`, { id: ada.accountId, first });
      expect(refused.body.errors[0]).toMatchObject({ message: "first must be between 1 and 50", extensions: { code: "BAD_USER_INPUT" } });
    }

    expect(await lookup({})).toMatchObject({ __typename: "IdentifierRequired" });
    expect(await lookup({ email: "" })).toMatchObject({ __typename: "IdentifierRequired" });
    expect(await lookup({ email: adaEmail, accountId: ada.accountId })).toMatchObject({ __typename: "InvalidRequest" });
    expect(await lookup({ email: "not-an-address" })).toMatchObject({ __typename: "InvalidIdentifier" });
    expect(await lookup({ phone: "2025550101" })).toMatchObject({ __typename: "InvalidIdentifier" });
  });

  it("answers another project's key as if the account or event did not exist", async () => {
    for (const by of [{ email: adaEmail }, { phone: bobPhone }, { accountId: ada.accountId }] as Record<string, string>[]) {
      expect(await lookup(by, otherKey)).toEqual({ __typename: "AccountLookup", account: null });
    }
    const anEvent = await h.db.prisma.outboxEvent.findFirstOrThrow({ where: { projectId: h.projectId } });
    expect((await data(Q.event, { id: anEvent.id }, otherKey)).event).toBeNull();
    expect((await data(Q.endSessions, { id: ada.accountId }, otherKey)).endAccountSessions).toEqual({ __typename: "NotFound", message: "no such account" });
    for (const id of ["acc_nobody", "", "  ", "not an id"]) {
      expect((await data(Q.endSessions, { id })).endAccountSessions).toEqual({ __typename: "NotFound", message: "no such account" });
    }
    expect((await data(Q.unmerge, { a: ada.accountId, b: bob.accountId }, otherKey)).unmergeAccount).toEqual({
      __typename: "NotFound",
      message: "no such account",
    });
    // Nothing changed: Ada still signs in and is still merged.
    expect((await data(Q.viewer, {}, bearer(ada))).viewer.id).toBe(ada.accountId);
    expect((await lookup({ accountId: bob.accountId })).account.mergeRole).toBe("secondary");
  });

  it("is for the secret key only", async () => {
    const publishable = { "x-api-key": h.publishableKey };
    const operations: [string, Record<string, unknown>][] = [
      [Q.lookup, { email: adaEmail }],
      [Q.event, { id: "evt_x" }],
      [Q.endSessions, { id: ada.accountId }],
      [Q.unmerge, { a: ada.accountId, b: bob.accountId }],
    ];
    for (const [query, variables] of operations) {
      for (const headers of [publishable, { ...publishable, ...bearer(ada) }]) {
        const r = await h.gql(query, variables, headers);
        expect(r.body.errors?.[0]?.extensions, query).toMatchObject({ code: "FORBIDDEN", error: "SecretKeyRequired" });
        expect(Object.values(r.body.data ?? {}).filter((v) => v !== null)).toEqual([]);
      }
      const none = await h.gql(query, variables, { "x-api-key": "" });
      expect(none.body.errors?.[0]?.extensions?.code).toBe("UNAUTHENTICATED");
    }
    expect((await data(Q.viewer, {}, bearer(ada))).viewer.id).toBe(ada.accountId);
  });

  it("finds an event by id with its exact body and its deliveries, all of them or one webhook's", async () => {
    const merged = await h.db.prisma.outboxEvent.findFirstOrThrow({ where: { projectId: h.projectId, eventType: "user.merged" } });
    const e = (await data(Q.event, { id: ` ${merged.id} ` })).event;
    expect(e).toMatchObject({ id: merged.id, eventType: "user.merged", test: false, body: merged.body });
    expect(e.deliveries).toEqual([{ id: expect.stringMatching(/^dlv_/), status: "pending", webhook: { id: webhookId, url: "http://127.0.0.1:9/hook" } }]);
    expect((await data(Q.event, { id: merged.id, webhookId })).event.deliveries).toHaveLength(1);
    expect((await data(Q.event, { id: merged.id, webhookId: "wh_other" })).event.deliveries).toEqual([]);
    for (const id of ["evt_unknown", "not an id", "", "x".repeat(500)]) expect((await data(Q.event, { id })).event).toBeNull();
  });

  it("unmerges for the user without a recent sign-in, emitting the user's own unmerge events and who did it", async () => {
    // Ada's last sign-in is a day old: her own unmerge now asks her to sign in again …
    await h.db.prisma.session.updateMany({ where: { accountId: ada.accountId }, data: { authTime: new Date(Date.now() - 86_400_000) } });
    expect((await data(Q.userUnmerge, {}, bearer(ada))).unmerge.__typename).toBe("ReauthenticationRequired");
    // … and a pair that is not merged with each other is refused, changing nothing.
    const carol = await h.signIn({ email: `carol-${backend}@example.com` });
    expect((await data(Q.unmerge, { a: ada.accountId, b: carol.accountId })).unmergeAccount.__typename).toBe("NotMerged");
    expect((await data(Q.unmerge, { a: bob.accountId, b: bob.accountId })).unmergeAccount.__typename).toBe("NotMerged");
    expect((await lookup({ accountId: ada.accountId })).account.mergePartner.id).toBe(bob.accountId);

    // Support acts, naming the secondary first: no recent sign-in is asked of anyone.
    const before = (await events(ada.accountId)).length;
    const sent = h.mailbox.messages.length;
    const done = (await data(Q.unmerge, { a: bob.accountId, b: ada.accountId })).unmergeAccount;
    expect(done).toEqual({ __typename: "UnmergeAccountPayload", message: "Accounts unmerged successfully", primaryId: ada.accountId, secondaryId: bob.accountId });
    const a = (await lookup({ accountId: ada.accountId })).account;
    expect(a).toMatchObject({ mergeRole: null, mergePartner: null, mergedAt: null });
    expect((await lookup({ phone: bobPhone })).account).toMatchObject({ id: bob.accountId, mergeRole: null });

    const key = await h.db.prisma.apiKey.findFirstOrThrow({ where: { keyHash: sha256Hex(h.apiKey) } });
    const bySupport = (await events(ada.accountId)).slice(before);
    expect(bySupport.map((e) => e.type)).toEqual(["user.unmerged", "user.updated"]);
    expect(bySupport[0].data).toEqual({
      user: expect.objectContaining({ user_id: ada.accountId }),
      primary_user_id: ada.accountId,
      secondary_user_id: bob.accountId,
      by: "support",
      api_key_id: key.id,
    });
    // The "was this you?" notices go to both accounts' addresses, as for the user's own unmerge.
    const noticed = async (to: string) => {
      for (let i = 0; i < 200; i++) {
        if (h.mailbox.messages.slice(sent).some((m) => m.to === to && /separated/.test(m.text))) return true;
        await new Promise((r) => setTimeout(r, 25));
      }
      return false;
    };
    expect(await noticed(adaEmail)).toBe(true);
    expect(await noticed(bobPhone)).toBe(true);
    // They say support acted, not from the address of the tool support used (33rd review).
    const toAda = h.mailbox.messages.slice(sent).find((m) => m.to === adaEmail && /separated/.test(m.text))!;
    expect(toAda.text).toContain("From: the service's support staff.");

    // The user's own unmerge, after merging again with a fresh sign-in: the same events, without `by`.
    await h.db.prisma.session.updateMany({ where: { accountId: ada.accountId }, data: { authTime: new Date() } });
    expect(await link(ada, bobPhone)).toBe("merged");
    const mark = (await events(ada.accountId)).length;
    expect((await data(Q.userUnmerge, {}, bearer(ada))).unmerge.__typename).toBe("MessagePayload");
    const byUser = (await events(ada.accountId)).slice(mark);
    expect(byUser.map((e) => e.type)).toEqual(bySupport.map((e) => e.type));
    expect(Object.keys(byUser[0].data).sort()).toEqual(["primary_user_id", "secondary_user_id", "user"]);

    expect((await data(Q.unmerge, { a: ada.accountId, b: bob.accountId })).unmergeAccount.__typename).toBe("NotMerged");
  });

  it("ends all of an account's sessions: its tokens stop working at once", async () => {
    const second = await h.signIn({ email: adaEmail });
    expect((await data(Q.viewer, {}, bearer(second))).viewer.id).toBe(ada.accountId);
    const live = (await lookup({ accountId: ada.accountId })).account.sessions.length;
    expect(live).toBeGreaterThanOrEqual(2);
    expect((await data(Q.endSessions, { id: ada.accountId })).endAccountSessions).toEqual({ __typename: "EndAccountSessionsPayload", ended: live });
    for (const token of [ada, second]) {
      const r = await h.gql(Q.viewer, {}, bearer(token));
      expect(r.body.errors?.[0]?.extensions?.code).toBe("UNAUTHENTICATED");
    }
    expect((await lookup({ accountId: ada.accountId })).account.sessions).toEqual([]);
    expect((await data(Q.endSessions, { id: ada.accountId })).endAccountSessions).toEqual({ __typename: "EndAccountSessionsPayload", ended: 0 });
  });
});
