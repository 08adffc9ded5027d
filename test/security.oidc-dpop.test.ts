// A client that sent a DPoP proof (RFC 9449) to the token endpoint got `token_type: DPoP` and an
// access token carrying `cnf.jkt`, as if bound to its key, yet the API and userinfo take it as a
// bearer token with no proof: whoever held a copy could use it. linkgate's tokens are bearer
// tokens (docs/oidc.md, "Tokens"), so the DPoP header is ignored and the answer says Bearer.
import { describe, expect, it } from "vitest";
import * as client from "openid-client";
import { backends } from "./support/db.ts";
import { Agent, authorizationUrl, authorize, discover, oidcHarnessWithApp } from "./support/oidc.ts";

describe.each(backends)("a DPoP proof at the token endpoint on %s", (backend) => {
  const { h, app, email, userinfo } = oidcHarnessWithApp(backend);

  it("issues bearer tokens claiming no key binding, for a code and a refresh", async () => {
    const config = await discover(h, app);
    const dpop = client.getDPoPHandle(config, await client.randomDPoPKeyPair("ES256"));
    const auth = await authorizationUrl(config, app);
    const cb = await authorize(h, new Agent(h), auth, email());
    const tokens = await client.authorizationCodeGrant(config, cb, { pkceCodeVerifier: auth.verifier, expectedState: auth.state, expectedNonce: auth.nonce }, undefined, { DPoP: dpop });
    const claimsOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split(".")[1], "base64url").toString());
    expect(tokens.token_type.toLowerCase()).toBe("bearer");
    expect(claimsOf(tokens.access_token)).not.toHaveProperty("cnf");
    expect((await userinfo(tokens.access_token)).status).toBe(200);
    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!, undefined, { DPoP: dpop });
    expect(refreshed.token_type.toLowerCase()).toBe("bearer");
    expect(claimsOf(refreshed.access_token)).not.toHaveProperty("cnf");
  });
});
