// An identity provider's discovery is the provider's to write (docs/external-identities.md): one
// that names an authorization endpoint a browser must not be sent to (javascript:, or plain
// http away from loopback) made every sign-in start with it answer 500. It is a refusal now.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";
import { startLoopbackServer, type UpstreamControls } from "./support/upstream-server.ts";
import { addProvider } from "./support/upstream-linkgate.ts";

const LOGIN = "http://localhost:4000/login?interaction=x1"; // the harness's hosted page

describe.each(backends)("a provider's discovery naming a forbidden authorization endpoint on %s", (backend) => {
  let h: Harness;
  let upstream: UpstreamControls;
  beforeAll(async () => {
    h = await startHarness(backend);
    upstream = await startLoopbackServer((req, res) => {
      if (req.url !== "/.well-known/openid-configuration") return res.writeHead(404).end();
      const o = upstream.origin;
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          issuer: o,
          authorization_endpoint: "javascript:alert(document.domain)//",
          token_endpoint: `${o}/token`,
          jwks_uri: `${o}/jwks`,
          response_types_supported: ["code"],
          subject_types_supported: ["public"],
          id_token_signing_alg_values_supported: ["RS256"],
        }),
      );
    });
    await addProvider(h, { issuer: upstream.origin, clientId: "c", clientSecret: "s", addRedirectUri: () => {} } as never, "jsidp");
  });
  afterAll(async () => {
    await h?.close();
    await upstream?.stop();
  });

  it("refuses the sign-in start with 400 ExternalSignInFailed, never a 500 or the URL", async () => {
    const started = await h.call("POST", "/auth/external/start", { body: { provider: "jsidp", redirect_uri: LOGIN }, headers: { "x-api-key": h.publishableKey } });
    expect(started.status, JSON.stringify(started.body)).toBe(400);
    expect(started.body).toEqual({ error: "ExternalSignInFailed", message: expect.any(String) });
    expect(JSON.stringify(started.body)).not.toContain("javascript:");
  });
});
