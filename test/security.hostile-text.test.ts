// Names that strangers choose are shown to others: an account's name (by the user, or by an
// identity provider's `name` claim) on the operator's dashboard and in every app and webhook, a
// passkey's name on the dashboard, an app's name on the consent page users decide on. A control
// character (a line break, an ANSI escape) or a bidirectional override would garble or disguise
// what is shown around it ("‮" reverses the rest of the line), so none of these names may hold
// one, as a provider's display name may not (docs/security.md, "Input, tenants and pages").
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { SoftAuthenticator } from "./support/authenticator.ts";
import { ORIGIN } from "./support/oidc.ts";
import { externalSignIn, externalWorldFor, start } from "./support/upstream-linkgate.ts";

const tag = `t${randomBytes(3).toString("hex")}`;
let seq = 0;

/** Names that must not be stored: a line break, an ANSI escape, each bidirectional override and isolate. */
const DISGUISED = [
  "Ada\nBcc: x@example.com",
  "Ada\u001b[2K\u001b[1AAdmin",
  "Ada\u0085Lovelace",
  "Ada \u202eecalevoL",
  "Ada \u202aLovelace",
  "Ada \u2067Lovelace\u2069",
  "Ada\u2028Bcc: x@example.com",
  "Ada\u2029Lovelace",
];
/** Names that show nothing: a zero-width space, the Hangul filler, the blank Braille pattern, a lone combining mark, a soft hyphen. */
const BLANK = ["\u200b", "\u3164\u3164", "\u2800", "\u0301", "\u00ad", "\u200b \u200d"];
/** Names people have, which stay: other scripts, right-to-left ones, joiners within a word. */
const FINE = ["Ada Lovelace", "אדה לאבלייס", "آدا لاولیس", "نی\u200cها", "👩\u200d💻 Ada", "O'Brien <Ada>"];

describe.each(backends)("names shown to others on %s", (backend) => {
  const { h, google, app } = externalWorldFor(backend, "https://app.example/after-sign-in");

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  it("an account's name: updateProfile refuses control and bidirectional override characters", async () => {
    const user = await h.signIn({ email: `names-${tag}@example.com` });
    const rename = async (name: string) =>
      (await h.gql(`mutation($n: String!) { updateProfile(name: $n) { __typename ... on Account { name } ... on Error { message } } }`, { n: name }, bearer(user.token)))
        .body.data.updateProfile;
    for (const name of DISGUISED) {
      expect(await rename(name), JSON.stringify(name)).toEqual({ __typename: "InvalidRequest", message: "name must not contain control or bidirectional override characters" });
    }
    for (const name of BLANK) {
      expect(await rename(name), JSON.stringify(name)).toEqual({ __typename: "InvalidRequest", message: "name must hold a character that shows" });
    }
    expect((await h.db.prisma.account.findUniqueOrThrow({ where: { id: user.accountId } })).name).toBeNull();
    for (const name of FINE) expect(await rename(name)).toEqual({ __typename: "Account", name });
  });

  it("a passkey's name: registering and renaming refuse them", async () => {
    const user = await h.signIn({ email: `passkey-names-${tag}@example.com` });
    const headers = { ...bearer(user.token), "x-api-key": h.publishableKey };
    const auth = new SoftAuthenticator(ORIGIN);
    const register = async (name: string) => {
      const opts = await h.call("POST", "/auth/passkey/registration/options", { headers });
      return h.call("POST", "/auth/passkey/registration/verify", { body: { response: auth.create(opts.body), name }, headers });
    };
    const refused = await register("Phone \u202eenohP");
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ error: "InvalidRequest", message: "a passkey's name must not contain control or bidirectional override characters" });
    const blank = await register("\u200b");
    expect(blank.body).toMatchObject({ error: "InvalidRequest", message: "a passkey's name must hold a character that shows" });
    expect(await h.db.prisma.passkey.count({ where: { accountId: user.accountId } })).toBe(0);

    const created = await register("Phone");
    expect(created.status).toBe(200);
    const id = created.body.passkey.id as string;
    for (const name of [...DISGUISED, ...BLANK]) {
      const r = await h.call("POST", "/auth/passkey/rename", { body: { id, name }, headers });
      expect(r.status, JSON.stringify(name)).toBe(400);
    }
    expect((await h.db.prisma.passkey.findUniqueOrThrow({ where: { id } })).name).toBe("Phone");
    for (const name of FINE) expect((await h.call("POST", "/auth/passkey/rename", { body: { id, name }, headers })).body.passkey.name).toBe(name);
  });

  it("an app's name, shown on the consent page: createOAuthClient and updateOAuthClient refuse them", async () => {
    const create = async (name: string) =>
      (
        await h.gql(`mutation($input: OAuthClientInput!) { createOAuthClient(input: $input) { __typename ... on Error { message } ... on OAuthClientWithSecret { client { id name } } } }`, {
          input: { name, redirectUris: ["https://app.example/cb"], type: "PUBLIC", firstParty: false },
        })
      ).body.data.createOAuthClient;
    const before = await h.db.prisma.oAuthClient.count();
    for (const name of DISGUISED) {
      expect(await create(name), JSON.stringify(name)).toEqual({ __typename: "InvalidRequest", message: "name must not contain control or bidirectional override characters" });
    }
    // "Allow ?" on the consent page
    for (const name of BLANK) {
      expect(await create(name), JSON.stringify(name)).toEqual({ __typename: "InvalidRequest", message: "name must hold a character that shows" });
    }
    expect(await h.db.prisma.oAuthClient.count()).toBe(before);
    const made = await create("Acme");
    const update = async (name: string) =>
      (
        await h.gql(`mutation($id: ID!, $input: OAuthClientInput!) { updateOAuthClient(id: $id, input: $input) { __typename ... on Error { message } } }`, {
          id: made.client.id,
          input: { name },
        })
      ).body.data.updateOAuthClient;
    expect(await update("Acme \u202eemcA")).toMatchObject({ __typename: "InvalidRequest" });
    expect((await h.db.prisma.oAuthClient.findFirstOrThrow({ where: { id: made.client.id } })).name).toBe("Acme");
  });

  it("an identity provider's name and e-mail claims holding them are dropped, as any unusable profile claim is", async () => {
    const sub = `g-${tag}-${++seq}`;
    google.loginAs({ sub, email: `not an address \u202emoc.elpmaxe@ada`, email_verified: false, name: "Ada\u001b[2J \u202eecalevoL" });
    const r = await externalSignIn(h, google, "google", app.redirectUri);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const account = await h.db.prisma.account.findUniqueOrThrow({ where: { id: r.body.account_id }, include: { identifiers: { include: { external: true } } } });
    expect(account.name).toBeNull();
    expect(account.identifiers[0].external).toMatchObject({ name: null, email: null, emailVerified: false });

    // a name claim that shows nothing is dropped too
    google.loginAs({ sub: `g-${tag}-${++seq}`, email: `blank-${tag}@example.com`, email_verified: true, name: "\u3164\u200b" });
    const blank = await externalSignIn(h, google, "google", app.redirectUri);
    expect((await h.db.prisma.account.findUniqueOrThrow({ where: { id: blank.body.account_id } })).name).toBeNull();

    // a name people have is kept
    google.loginAs({ sub: `g-${tag}-${++seq}`, email: `ada-${tag}@example.com`, email_verified: true, name: "آدا لاولیس" });
    const fine = await externalSignIn(h, google, "google", app.redirectUri);
    expect((await h.db.prisma.account.findUniqueOrThrow({ where: { id: fine.body.account_id } })).name).toBe("آدا لاولیس");
  });
});

// A documented limit counts characters as people count them: code points, an emoji one (not the
// two UTF-16 units JavaScript's `.length` counts), in the composed form (NFC) in which the name is
// stored and shown back, so "é" typed as "e" + U+0301 is the same name, and one character.
describe.each(backends)("names are counted in characters, as stored, on %s", (backend) => {
  const { h, google, app } = externalWorldFor(backend, "https://app.example/after-sign-in");
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const emoji = (n: number) => "😀".repeat(n);
  const CAFE_NFD = "Cafe\u0301";
  const CAFE = "Caf\u00e9";

  it("createProject: 200 emoji are 200 characters, 201 are refused; the name is stored in NFC", async () => {
    const create = async (name: string) =>
      (
        await h.gql(`mutation($name: String!) { createProject(name: $name) { __typename ... on CreateProjectPayload { project { name } } ... on Error { message } } }`, { name }, {
          "x-admin-token": h.adminToken,
        })
      ).body.data.createProject;
    expect(await create(emoji(150))).toEqual({ __typename: "CreateProjectPayload", project: { name: emoji(150) } });
    expect(await create(emoji(200))).toEqual({ __typename: "CreateProjectPayload", project: { name: emoji(200) } });
    const before = await h.db.prisma.project.count();
    expect(await create(emoji(201))).toEqual({ __typename: "InvalidRequest", message: "name must be 1 to 200 characters" });
    expect(await h.db.prisma.project.count()).toBe(before);
    expect(await create(` ${CAFE_NFD}${"e\u0301".repeat(195)} `)).toEqual({ __typename: "CreateProjectPayload", project: { name: `${CAFE}${"\u00e9".repeat(195)}` } });
  });

  it("createOAuthClient and updateOAuthClient: 100 emoji are 100 characters, 101 are refused", async () => {
    const create = async (name: string) =>
      (
        await h.gql(`mutation($input: OAuthClientInput!) { createOAuthClient(input: $input) { __typename ... on Error { message } ... on OAuthClientWithSecret { client { id name } } } }`, {
          input: { name, redirectUris: ["https://app.example/cb"], type: "PUBLIC", firstParty: false },
        })
      ).body.data.createOAuthClient;
    const made = await create(emoji(100));
    expect(made).toMatchObject({ __typename: "OAuthClientWithSecret", client: { name: emoji(100) } });
    expect(await create(emoji(101))).toEqual({ __typename: "InvalidRequest", message: "name must be 1 to 100 characters" });
    const update = async (name: string) =>
      (await h.gql(`mutation($id: ID!, $input: OAuthClientInput!) { updateOAuthClient(id: $id, input: $input) { __typename ... on Error { message } ... on UpdateOAuthClientPayload { client { name } } } }`, { id: made.client.id, input: { name } }))
        .body.data.updateOAuthClient;
    expect(await update(`${emoji(99)}!`)).toEqual({ __typename: "UpdateOAuthClientPayload", client: { name: `${emoji(99)}!` } });
    expect(await update(emoji(101))).toMatchObject({ __typename: "InvalidRequest" });
    expect(await update(CAFE_NFD)).toEqual({ __typename: "UpdateOAuthClientPayload", client: { name: CAFE } });
  });

  it("updateProfile: 200 emoji are a name, 201 are refused; another spelling of the same name changes nothing and emits no event", async () => {
    const user = await h.signIn({ email: `emoji-name-${tag}@example.com` });
    const rename = async (name: string) =>
      (await h.gql(`mutation($n: String!) { updateProfile(name: $n) { __typename ... on Account { name } ... on Error { message } } }`, { n: name }, bearer(user.token))).body.data.updateProfile;
    expect(await rename(emoji(200))).toEqual({ __typename: "Account", name: emoji(200) });
    expect(await rename(emoji(201))).toEqual({ __typename: "InvalidRequest", message: "name must be a string of at most 200 characters" });
    expect((await h.db.prisma.account.findUniqueOrThrow({ where: { id: user.accountId } })).name).toBe(emoji(200));
    expect(await rename(CAFE)).toEqual({ __typename: "Account", name: CAFE });
    const events = () => h.db.prisma.outboxEvent.count({ where: { projectId: h.projectId, eventType: "user.updated" } });
    const emitted = await events();
    expect(await rename(` ${CAFE_NFD} `)).toEqual({ __typename: "Account", name: CAFE });
    expect(await events()).toBe(emitted);
  });

  it("a passkey's name: 100 emoji are 100 characters when registering and renaming, 101 are refused", async () => {
    const user = await h.signIn({ email: `emoji-passkey-${tag}@example.com` });
    const headers = { ...bearer(user.token), "x-api-key": h.publishableKey };
    const auth = new SoftAuthenticator(ORIGIN);
    const register = async (name: string) => {
      const opts = await h.call("POST", "/auth/passkey/registration/options", { headers });
      return h.call("POST", "/auth/passkey/registration/verify", { body: { response: auth.create(opts.body), name }, headers });
    };
    const refused = await register(emoji(101));
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ error: "InvalidRequest", message: "a passkey's name is 1 to 100 characters" });
    const created = await register(emoji(100));
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    expect(created.body.passkey.name).toBe(emoji(100));
    const id = created.body.passkey.id as string;
    const rename = (name: string) => h.call("POST", "/auth/passkey/rename", { body: { id, name }, headers });
    expect((await rename(emoji(101))).status).toBe(400);
    expect((await h.db.prisma.passkey.findUniqueOrThrow({ where: { id } })).name).toBe(emoji(100));
    expect((await rename(CAFE_NFD)).body.passkey.name).toBe(CAFE);
  });

  it("an identity provider's displayName: 60 emoji are 60 characters, 61 are refused", async () => {
    const create = async (slug: string, displayName: string) =>
      (
        await h.gql(`mutation($input: IdentityProviderInput!) { createIdentityProvider(input: $input) { __typename ... on Error { message } ... on IdentityProvider { displayName } } }`, {
          input: { preset: "OIDC", slug, displayName, issuer: google.issuer, clientId: "c", clientSecret: "s" },
        })
      ).body.data.createIdentityProvider;
    expect(await create(`emoji-${tag}`, emoji(60))).toEqual({ __typename: "IdentityProvider", displayName: emoji(60) });
    expect(await create(`emoji-more-${tag}`, emoji(61))).toEqual({ __typename: "InvalidRequest", message: "displayName must be 1 to 60 characters" });
    expect(await h.db.prisma.identityProvider.count({ where: { slug: `emoji-more-${tag}` } })).toBe(0);
  });

  it("a webhook's description: 500 emoji are 500 characters, 501 are refused", async () => {
    const create = async (description: string) =>
      (
        await h.gql(`mutation($i: WebhookInput!) { createWebhook(input: $i) { __typename ... on Error { message } ... on CreateWebhookPayload { webhook { id description } } } }`, {
          i: { url: "https://127.0.0.1/emoji", events: ["user.created"], description },
        })
      ).body.data.createWebhook;
    const made = await create(emoji(500));
    expect(made).toMatchObject({ __typename: "CreateWebhookPayload", webhook: { description: emoji(500) } });
    expect(await create(emoji(501))).toEqual({ __typename: "InvalidRequest", message: "description must be a string of at most 500 characters" });
    await h.gql(`mutation($id: ID!) { deleteWebhook(id: $id) { __typename } }`, { id: made.webhook.id });
  });

  it("an identity provider's name claim of 150 emoji is kept whole, one of 201 characters is dropped", async () => {
    google.loginAs({ sub: `g-${tag}-${++seq}`, email: `emoji-claim-${tag}@example.com`, email_verified: true, name: ` ${emoji(150)} ` });
    const kept = await externalSignIn(h, google, "google", app.redirectUri);
    expect(kept.status, JSON.stringify(kept.body)).toBe(200);
    expect((await h.db.prisma.account.findUniqueOrThrow({ where: { id: kept.body.account_id } })).name).toBe(emoji(150));

    google.loginAs({ sub: `g-${tag}-${++seq}`, email: `emoji-long-${tag}@example.com`, email_verified: true, name: `x${emoji(200)}` });
    const long = await externalSignIn(h, google, "google", app.redirectUri);
    expect(long.status, JSON.stringify(long.body)).toBe(200);
    expect((await h.db.prisma.account.findUniqueOrThrow({ where: { id: long.body.account_id } })).name).toBeNull();
  });

  it("a redirect URI of 1,500 emoji (2,048 characters at most) is registered, and an external sign-in starts with it", async () => {
    const uri = `https://app.example/cb/${emoji(1500)}`;
    const made = await h.gql(`mutation($input: OAuthClientInput!) { createOAuthClient(input: $input) { __typename ... on Error { message } } }`, {
      input: { name: "Long", redirectUris: [uri], type: "CONFIDENTIAL", firstParty: true },
    });
    expect(made.body.data.createOAuthClient).toEqual({ __typename: "OAuthClientWithSecret" });
    const started = await start(h, "google", uri);
    expect(started.status, JSON.stringify(started.body)).toBe(200);
    const over = await h.gql(`mutation($input: OAuthClientInput!) { createOAuthClient(input: $input) { __typename ... on Error { message } } }`, {
      input: { name: "Longer", redirectUris: [`https://app.example/cb/${emoji(2030)}`], type: "CONFIDENTIAL", firstParty: true },
    });
    expect(over.body.data.createOAuthClient).toEqual({ __typename: "InvalidRequest", message: "a redirect URI must be a string of at most 2048 characters" });
  });
});
