// A provider pointed at another issuer no longer signs in the identities of the old one, and
// they stop counting as a way their accounts sign in (docs/external-identities.md, "Removing and
// unmerging"). A sign-in at the old issuer that was under way when the admin moved the provider
// (its callback done, its completion not yet) is one of those: finished afterwards, it put the
// provider back on the identity, which then counted again, so the account's last address could
// be removed and the account was left with nothing that signs in. Moving a provider ends its
// sign-ins in progress, as deleting it does; and an identity is only ever tied to a provider
// whose flow is still there when its claims are written (the e-mail confirmation below read its
// flow before the move and wrote the provider on the identity after it; Postgres only: a second
// connection holds the account's lock so the move comes in between).
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends } from "./support/db.ts";
import { startUpstreamOidc, type UpstreamOidc } from "./support/upstream.ts";
import { waitingForLock } from "./support/locks.ts";
import { addProvider, authorize, complete, confirm, externalLink, externalValue, externalWorldFor } from "./support/upstream-linkgate.ts";

const tag = `t${randomBytes(3).toString("hex")}`;
let seq = 0;

describe.each(backends)("a provider moved to another issuer while a sign-in at the old one is under way, on %s", (backend) => {
  const world = externalWorldFor(backend, "https://app.example/moved");
  const { h } = world;
  let workforce: UpstreamOidc;
  beforeAll(async () => {
    workforce = await startUpstreamOidc();
  });
  afterAll(async () => {
    await workforce?.stop();
  });

  it("the sign-in does not finish, and the identity still does not count: LastIdentifier", async () => {
    const { google, app } = world;
    const { id } = await addProvider(h, workforce, "workforce");
    const mail = `mail-${tag}-${++seq}@example.com`;
    const user = await h.signIn({ email: mail });
    const person = { sub: `w-${tag}-${++seq}`, email: `w-${tag}-${seq}@example.com`, email_verified: false };
    workforce.loginAs(person);
    const linked = await externalLink(h, workforce, "workforce", app.redirectUri, user.token);
    expect(linked.status, JSON.stringify(linked.body)).toBe(200);

    // the person signs in at the old issuer: back from it, not yet completed
    const underWay = await authorize(h, workforce, "workforce", app.redirectUri);
    const moved = await h.gql(`mutation($id: ID!, $input: IdentityProviderInput!) { updateIdentityProvider(id: $id, input: $input) { __typename } }`, {
      id,
      input: { issuer: google.issuer, clientId: google.clientId, clientSecret: google.clientSecret },
    });
    expect(moved.body.data.updateIdentityProvider.__typename).toBe("IdentityProvider");

    const finished = await complete(h, underWay.started.state_id, underWay.code);
    expect({ status: finished.status, error: finished.body.error }).toEqual({ status: 400, error: "OTPInvalid" });
    const identity = await h.db.prisma.identifier.findFirstOrThrow({ where: { kind: "external", value: externalValue(workforce, person.sub) }, include: { external: true } });
    expect({ account: identity.accountId, provider: identity.external?.providerId }).toEqual({ account: user.accountId, provider: null });

    const removed = await h.call("POST", "/users/link/remove", { body: { email: mail }, headers: { authorization: `Bearer ${user.token}` } });
    expect({ status: removed.status, error: removed.body.error }).toEqual({ status: 409, error: "LastIdentifier" });
  });

  const move = (id: string) =>
    h.gql(`mutation($id: ID!, $input: IdentityProviderInput!) { updateIdentityProvider(id: $id, input: $input) { __typename } }`, {
      id,
      input: { issuer: world.google.issuer, clientId: world.google.clientId, clientSecret: world.google.clientSecret },
    });

  it.runIf(backend === "postgres")("an e-mail confirmation that read its flow before the move does not tie the identity to the moved provider", async () => {
    const other = await startUpstreamOidc();
    const blocker = new pg.Client({ connectionString: h.db.url });
    await blocker.connect();
    try {
      const slug = `other-${++seq}`;
      const { id } = await addProvider(h, other, slug);
      const mail = `held-${tag}-${++seq}@example.com`;
      const user = await h.signIn({ email: mail });
      const person = { sub: `o-${tag}-${++seq}`, email: mail, email_verified: true };
      other.loginAs(person);
      const { started, code } = await authorize(h, other, slug, world.app.redirectUri);
      const asked = await complete(h, started.state_id, code);
      expect(asked.body.verification_required, JSON.stringify(asked.body)).toBe("email");
      const otp = await h.mailbox.otp(mail);

      await blocker.query("BEGIN");
      await blocker.query("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", [user.accountId]);
      const confirmed = confirm(h, asked.body.state_id, otp);
      await waitingForLock(blocker, 1); // has read its flow, waits for the account
      expect((await move(id)).body.data.updateIdentityProvider.__typename).toBe("IdentityProvider");
      await blocker.query("COMMIT");
      const done = await confirmed;
      expect(done.status, JSON.stringify(done.body)).toBe(200);

      const identity = await h.db.prisma.identifier.findFirstOrThrow({ where: { kind: "external", value: externalValue(other, person.sub) }, include: { external: true } });
      expect({ account: identity.accountId, provider: identity.external?.providerId }).toEqual({ account: user.accountId, provider: null });
      const removed = await h.call("POST", "/users/link/remove", { body: { email: mail }, headers: { authorization: `Bearer ${user.token}` } });
      expect({ status: removed.status, error: removed.body.error }).toEqual({ status: 409, error: "LastIdentifier" });
    } finally {
      await blocker.query("ROLLBACK").catch(() => {});
      await blocker.end();
      await other.stop();
    }
  });
});
