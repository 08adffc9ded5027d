// A provider's answer that is not what its API promises (tenth review): GitHub's /user answering
// `null` or text that is not JSON, or a user id, name or e-mail holding a NUL that Postgres will
// not store, was a 500 at the callback, and the flow stayed unfinished, so the same callback
// gave another 500. Each is now the app's redirect with ExternalSignInFailed, or, for a profile
// claim that cannot be stored, a sign-in without that claim; the flow is used up either way.
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";
import { ORIGIN, registerClient, type RegisteredClient } from "./support/oidc.ts";
import { callback, complete, freshAddress, landing } from "./support/upstream-linkgate.ts";

/** A GitHub Enterprise Server whose token endpoint gives any code a token and whose /user answers `user`. */
async function startOddGithub() {
  const answers = { user: "", emails: "[]" };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const path = new URL(req.url ?? "/", "http://x").pathname;
      const json = (body: string) => res.writeHead(200, { "content-type": "application/json" }).end(body);
      if (path === "/login/oauth/access_token") return json(JSON.stringify({ access_token: "gho_odd", token_type: "bearer", scope: "read:user,user:email" }));
      if (path === "/api/v3/user") return json(answers.user);
      if (path === "/api/v3/user/emails") return json(answers.emails);
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return { origin: `http://127.0.0.1:${port}`, answers, stop: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe.each(backends)("odd answers from a provider's API on %s", (backend) => {
  let h: Harness;
  let odd: Awaited<ReturnType<typeof startOddGithub>>;
  let app: RegisteredClient;

  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_ISSUER: ORIGIN } });
    odd = await startOddGithub();
    app = await registerClient(h, { firstParty: true, redirectUris: ["https://app.example/cb"] });
    const created = await h.gql(`mutation($input: IdentityProviderInput!) { createIdentityProvider(input: $input) { __typename } }`, {
      input: { preset: "GITHUB", slug: "ghe", issuer: odd.origin, clientId: "c", clientSecret: "s" },
    });
    expect(created.body.data.createIdentityProvider.__typename).toBe("IdentityProvider");
  });
  afterAll(async () => {
    await h?.close();
    await odd?.stop();
  });

  /** Start, then the provider's redirect back with a code and the flow's state: what the callback answers, twice. */
  async function signInWith(user: string, emails = "[]") {
    odd.answers.user = user;
    odd.answers.emails = emails;
    const from = freshAddress();
    const started = await h.call("POST", "/auth/external/start", { body: { provider: "ghe", redirect_uri: app.redirectUri }, from });
    expect(started.status).toBe(200);
    const authorization = new URL(started.body.authorization_url);
    const back = new URL(authorization.searchParams.get("redirect_uri")!);
    back.search = new URLSearchParams({ code: "any", state: authorization.searchParams.get("state")! }).toString();
    const first = await callback(h, back, { from });
    const again = await callback(h, back, { from });
    return { stateId: started.body.state_id as string, first, again };
  }

  for (const [what, user] of [
    ["null", "null"],
    ["text that is not JSON", "not json"],
    ["a list", "[1]"],
    ["a user id with a NUL", JSON.stringify({ id: "x\u0000", login: "x" })],
    ["a user id of 300 characters", JSON.stringify({ id: "9".repeat(300), login: "x" })],
  ] as const) {
    it(`/user answering ${what}: the app gets ExternalSignInFailed, and the flow is used up`, async () => {
      const { first, again } = await signInWith(user);
      expect(first.status).toBe(303);
      expect(landing(first).error).toBe("ExternalSignInFailed");
      expect(again.status).toBe(400); // the expired page: a flow's callback happens once
    });
  }

  it("a name and an e-mail with a NUL are dropped: the sign-in goes on without them", async () => {
    const emails = JSON.stringify([{ email: "a\u0000@example.com", primary: true, verified: true }]);
    const { stateId, first } = await signInWith(JSON.stringify({ id: 77, login: "odd", name: "a\u0000b" }), emails);
    const back = landing(first);
    expect(back.error).toBeNull();
    const done = await complete(h, stateId, back.code!);
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    const stored = await h.db.prisma.externalIdentity.findFirstOrThrow({ where: { identifier: { value: `${odd.origin}#77` } } });
    expect(stored).toMatchObject({ email: null, emailVerified: false, name: null });
  });
});
