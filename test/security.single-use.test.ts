// A code and a refresh token are single use even when presented many times at once on many
// processes (docs/oidc.md, "Tokens"): exactly one presentation succeeds, and the others are
// treated like a replay — invalid_grant, the grant revoked, the project told. On Postgres the
// presentations are split between the test's app and a second linkgate process.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as client from "openid-client";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { Agent, authorizationUrl, authorize, discover, ORIGIN, registerClient, type RegisteredClient } from "./support/oidc.ts";
import { startSecondProcess, type SecondProcess } from "./support/second-process.ts";

const PARALLEL = 25;

describe.each(backends)("single use under concurrency on %s", (backend) => {
  let h: Harness;
  let second: SecondProcess | undefined;
  let app: RegisteredClient;
  let config: client.Configuration;
  let n = 0;

  beforeAll(async () => {
    h = await startHarness(backend, { env: { LINKGATE_ISSUER: ORIGIN } });
    if (backend === "postgres") second = await startSecondProcess(h);
    app = await registerClient(h);
    config = await discover(h, app);
  });
  afterAll(async () => {
    await second?.close();
    await h?.close();
  });

  /** POST /oauth/token as the confidential client, on this process (even i) or the other one (odd i). */
  async function token(i: number, params: Record<string, string>): Promise<{ status: number; body: any }> {
    const init: RequestInit = {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: `Basic ${Buffer.from(`${app.clientId}:${app.clientSecret}`).toString("base64")}`,
      },
      body: new URLSearchParams(params).toString(),
    };
    const res = second && i % 2 === 1 ? await second.fetch("/oauth/token", init) : await h.app.fetch(new Request(`${ORIGIN}/oauth/token`, init));
    return { status: res.status, body: await res.json() };
  }

  async function codeFor(who: string) {
    const auth = await authorizationUrl(config, app);
    const cb = await authorize(h, new Agent(h), auth, who);
    return { code: cb.searchParams.get("code")!, verifier: auth.verifier, cb, auth };
  }

  const suspicious = async (reason: string) =>
    (await h.db.prisma.outboxEvent.findMany({ where: { eventType: "security.suspicious_activity" } })).map((e) => JSON.parse(e.body).data).filter((d) => d.reason === reason);
  const viewer = (accessToken: string) => h.gql("{ viewer { id } }", {}, { authorization: `Bearer ${accessToken}` });

  it(`${PARALLEL} parallel redemptions of one authorization code: exactly one gets tokens, the others invalid_grant, and the grant is revoked`, async () => {
    const { code, verifier } = await codeFor(`code.${++n}@example.com`);
    const before = (await suspicious("authorization_code_reused")).length;
    const results = await Promise.all(
      Array.from({ length: PARALLEL }, (_, i) => token(i, { grant_type: "authorization_code", code, redirect_uri: app.redirectUri, code_verifier: verifier })),
    );
    const winners = results.filter((r) => r.status === 200);
    expect(winners, JSON.stringify(results.map((r) => r.status))).toHaveLength(1);
    for (const loser of results.filter((r) => r.status !== 200)) expect(loser).toEqual({ status: 400, body: expect.objectContaining({ error: "invalid_grant" }) });

    // a second use revokes what the first one issued: the winner's tokens end with the grant
    expect((await viewer(winners[0].body.access_token)).body.data?.viewer ?? null).toBeNull();
    expect(await token(0, { grant_type: "refresh_token", refresh_token: winners[0].body.refresh_token })).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
    expect((await suspicious("authorization_code_reused")).length).toBe(before + 1);
  });

  it(`${PARALLEL} parallel uses of one refresh token: exactly one gets a new one, and that one is not multiplied`, async () => {
    const { cb, auth } = await codeFor(`refresh.${++n}@example.com`);
    const tokens = await client.authorizationCodeGrant(config, cb, { pkceCodeVerifier: auth.verifier, expectedState: auth.state, expectedNonce: auth.nonce });
    const refreshToken = tokens.refresh_token!;
    const before = (await suspicious("refresh_token_reused")).length;

    const results = await Promise.all(Array.from({ length: PARALLEL }, (_, i) => token(i, { grant_type: "refresh_token", refresh_token: refreshToken })));
    const winners = results.filter((r) => r.status === 200);
    expect(winners, JSON.stringify(results.map((r) => r.status))).toHaveLength(1);
    for (const loser of results.filter((r) => r.status !== 200)) expect(loser).toEqual({ status: 400, body: expect.objectContaining({ error: "invalid_grant" }) });

    // the one new refresh token belongs to the revoked grant: it refreshes nothing, on either process
    const again = await Promise.all([0, 1].map((i) => token(i, { grant_type: "refresh_token", refresh_token: winners[0].body.refresh_token })));
    for (const r of again) expect(r).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
    expect((await viewer(winners[0].body.access_token)).body.data?.viewer ?? null).toBeNull();
    expect((await suspicious("refresh_token_reused")).length).toBe(before + 1);
  });

  it("one presentation at a time still works: a code, then its refresh tokens in turn", async () => {
    const { code, verifier } = await codeFor(`sequential.${++n}@example.com`);
    const first = await token(0, { grant_type: "authorization_code", code, redirect_uri: app.redirectUri, code_verifier: verifier });
    expect(first.status).toBe(200);
    const second = await token(1, { grant_type: "refresh_token", refresh_token: first.body.refresh_token });
    expect(second.status).toBe(200);
    const third = await token(0, { grant_type: "refresh_token", refresh_token: second.body.refresh_token });
    expect(third.status).toBe(200);
    expect((await viewer(third.body.access_token)).body.data.viewer.id).toEqual(expect.any(String));
  });
});
