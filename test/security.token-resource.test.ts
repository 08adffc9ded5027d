// A token request naming another project's resource is refused without using the token up
// (docs/oidc.md, "Tokens"). oidc-provider rotated a refresh token before it judged `resource`:
// the refused request had spent it, so the client's next, ordinary refresh looked like a replay,
// and the user's grant and session were ended with a refresh_token_reused alarm.
import { describe, expect, it } from "vitest";
import * as client from "openid-client";
import { resourceFor } from "../src/oidc/provider.ts";
import { backends } from "./support/db.ts";
import { Agent, authorizationUrl, authorize, oidcHarnessWithApp, ORIGIN } from "./support/oidc.ts";

const FOREIGN = "urn:linkgate:project:prj_other";

describe.each(backends)("a token request for another project's resource on %s", (backend) => {
  const { h, app, config, email } = oidcHarnessWithApp(backend);

  async function token(params: Record<string, string> | [string, string][], basic = `${app.clientId}:${app.clientSecret}`): Promise<{ status: number; body: any }> {
    const res = await h.app.fetch(
      new Request(`${ORIGIN}/oauth/token`, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          authorization: `Basic ${Buffer.from(basic).toString("base64")}`,
        },
        body: new URLSearchParams(params).toString(),
      }),
    );
    return { status: res.status, body: await res.json() };
  }

  async function codeFor(who: string) {
    const auth = await authorizationUrl(config(), app);
    const cb = await authorize(h, new Agent(h), auth, who);
    return { code: cb.searchParams.get("code")!, verifier: auth.verifier };
  }

  const reuseAlarms = async () =>
    (await h.db.prisma.outboxEvent.findMany({ where: { eventType: "security.suspicious_activity" } })).filter((e) => JSON.parse(e.body).data.reason.endsWith("_reused")).length;
  const viewer = async (accessToken: string) => (await h.gql("{ viewer { id } }", {}, { authorization: `Bearer ${accessToken}` })).body.data?.viewer ?? null;

  it("refuses a refresh with invalid_target and leaves the refresh token good", async () => {
    const { code, verifier } = await codeFor(email("refresh"));
    const issued = await token({ grant_type: "authorization_code", code, redirect_uri: app.redirectUri, code_verifier: verifier });
    expect(issued.status).toBe(200);
    const before = await reuseAlarms();

    const refused = await token({ grant_type: "refresh_token", refresh_token: issued.body.refresh_token, resource: FOREIGN });
    expect(refused).toEqual({ status: 400, body: { error: "invalid_target", error_description: "this client's tokens are for its own project only" } });
    const ownAndForeign = await token([
      ["grant_type", "refresh_token"],
      ["refresh_token", issued.body.refresh_token],
      ["resource", resourceFor(h.projectId)],
      ["resource", FOREIGN],
    ]);
    expect(ownAndForeign.body.error).toBe("invalid_target");

    const refreshed = await token({ grant_type: "refresh_token", refresh_token: issued.body.refresh_token, resource: resourceFor(h.projectId) });
    expect(refreshed.status).toBe(200);
    expect(await viewer(refreshed.body.access_token)).not.toBeNull();
    const again = await token({ grant_type: "refresh_token", refresh_token: refreshed.body.refresh_token });
    expect(again.status).toBe(200);
    expect(await reuseAlarms()).toBe(before);
  });

  it("tells a caller without the client's secret nothing more than invalid_client, known client or not", async () => {
    const { code, verifier } = await codeFor(email("stranger"));
    const issued = await token({ grant_type: "authorization_code", code, redirect_uri: app.redirectUri, code_verifier: verifier });
    const asked = { grant_type: "refresh_token", refresh_token: issued.body.refresh_token, resource: FOREIGN };
    const known = await token(asked, `${app.clientId}:not-the-secret`);
    const unknown = await token(asked, `no-such-client:not-the-secret`);
    expect(known.status).toBe(401);
    expect(known.body.error).toBe("invalid_client");
    expect(unknown).toEqual(known);
    expect((await token({ grant_type: "refresh_token", refresh_token: issued.body.refresh_token })).status).toBe(200);
  });

  it("refuses a code redemption with invalid_target and leaves the code good", async () => {
    const { code, verifier } = await codeFor(email("code"));
    const redeem = { grant_type: "authorization_code", code, redirect_uri: app.redirectUri, code_verifier: verifier };
    expect((await token({ ...redeem, resource: FOREIGN })).body.error).toBe("invalid_target");
    const issued = await token(redeem);
    expect(issued.status).toBe(200);
    expect(await viewer(issued.body.access_token)).not.toBeNull();
  });
});
