// A signed-in call that stores something is bounded per account: passkey registration options
// store a challenge each, and one code buys a stranger an account of their own to ask with
// (2,000 rows in 46 s from one address before the bound). The 31st in ten minutes is refused
// without storing anything; another account, even at the same address, is not affected.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REGISTRATION_OPTIONS_PER_ACCOUNT } from "../src/auth/passkeys.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

describe.each(backends)("state stored by a signed-in account, on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  const challenges = () => h.db.prisma.webauthnChallenge.count({ where: { purpose: "registration" } });

  it("passkey registration options: 30 in ten minutes per account, then 429 RateLimited over REST and GraphQL alike", async () => {
    expect(REGISTRATION_OPTIONS_PER_ACCOUNT).toEqual({ max: 30, windowSeconds: 600 });
    const user = await h.signIn({ email: "registers-a-lot@example.com" });
    const headers = { authorization: `Bearer ${user.token}`, "x-api-key": h.publishableKey };
    const options = () => h.call("POST", "/auth/passkey/registration/options", { headers });
    const query = "mutation { startPasskeyRegistration { __typename ... on PasskeyCreationOptions { options } ... on RateLimited { retryAfterSeconds } } }";
    const gql = () => h.call("POST", "/graphql", { body: { query }, headers });

    for (let i = 0; i < 15; i++) expect((await options()).status).toBe(200);
    for (let i = 0; i < 15; i++) expect((await gql()).body.data.startPasskeyRegistration.options.challenge).toEqual(expect.any(String));
    const stored = await challenges();
    expect(stored).toBe(30);

    const refused = await options();
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ error: "RateLimited" });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    const refusedGql = await gql();
    expect(refusedGql.body.data.startPasskeyRegistration).toEqual({ __typename: "RateLimited", retryAfterSeconds: expect.any(Number) });
    expect(await challenges()).toBe(stored);

    // another account at the same address still registers
    const other = await h.signIn({ email: "registers-once@example.com" });
    const theirs = await h.call("POST", "/auth/passkey/registration/options", { headers: { authorization: `Bearer ${other.token}`, "x-api-key": h.publishableKey } });
    expect(theirs.status).toBe(200);
  });
});
