// A process remembers the access tokens it has verified, until they expire (docs/security.md,
// "Verified tokens"). Remembering must change nothing a client can observe: a token is good for
// its hour and not a second longer, a token changed in any byte is checked afresh, and a sign-out
// still ends a token the process has just verified, on REST (userinfo) and GraphQL alike.
import { decodeJwt } from "jose";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";

describe.each(backends)("verified access tokens on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());
  afterEach(() => {
    vi.useRealTimers();
  });

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const userinfo = (token: string) => h.call("GET", "/oauth/userinfo", { headers: bearer(token) });
  const viewer = (token: string) => h.gql(`{ viewer { id } }`, {}, bearer(token));
  const errorCode = (res: { body: any }) => res.body.errors?.[0]?.extensions?.code;

  it("a token verified a moment ago is refused once it expires", async () => {
    const { token, accountId } = await h.signIn({ email: "expiring@example.com" });
    expect((await userinfo(token)).body.sub).toBe(accountId);
    expect((await viewer(token)).body.data.viewer.id).toBe(accountId);

    // The session stays live in the database; only the token's own expiry has passed.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime((decodeJwt(token).exp as number) * 1000);
    const late = await userinfo(token);
    expect(late.status).toBe(401);
    expect(errorCode(await viewer(token))).toBe("UNAUTHENTICATED");

    vi.setSystemTime((decodeJwt(token).exp as number) * 1000 - 1000);
    expect((await userinfo(token)).status).toBe(200);
  });

  it("a verified token changed in its signature or its claims is refused", async () => {
    const { token, accountId } = await h.signIn({ email: "tampered@example.com" });
    const other = await h.signIn({ email: "someone-else@example.com" });
    expect((await userinfo(token)).status).toBe(200);
    expect((await userinfo(other.token)).status).toBe(200);

    const [header, payload, signature] = token.split(".");
    const flipped = signature.slice(0, -2) + (signature.at(-2) === "A" ? "B" : "A") + signature.at(-1);
    expect((await userinfo(`${header}.${payload}.${flipped}`)).status).toBe(401);
    // the other account's claims under this token's signature: both halves were verified, apart
    const otherPayload = other.token.split(".")[1];
    expect((await userinfo(`${header}.${otherPayload}.${signature}`)).status).toBe(401);
    expect(errorCode(await viewer(`${header}.${otherPayload}.${signature}`))).toBe("UNAUTHENTICATED");

    expect((await userinfo(token)).body.sub).toBe(accountId);
  });

  it("a sign-out ends a token the process has just verified", async () => {
    const { token } = await h.signIn({ email: "leaving@example.com" });
    expect((await userinfo(token)).status).toBe(200);
    expect((await viewer(token)).body.data.viewer).not.toBeNull();

    const out = await h.gql(`mutation { signOut }`, {}, bearer(token));
    expect(out.body.data.signOut).toBe(true);
    expect((await userinfo(token)).status).toBe(401);
    expect(errorCode(await viewer(token))).toBe("UNAUTHENTICATED");
  });
});
