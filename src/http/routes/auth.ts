import { Hono } from "hono";
import { authenticateToken, bearerToken } from "../../auth/authenticate.ts";
import { projectActor, userActor } from "../credentials.ts";
import { reauthenticateWithPasskey } from "../../auth/passkeys.ts";
import { completeReauthentication, startReauthentication } from "../../auth/reauthenticate.ts";
import { completeSignIn, startSignIn, userinfo } from "../../auth/sign-in.ts";
import type { AppEnv } from "../env.ts";
import { jsonBody, str } from "../body.ts";

export function authRoutes() {
  const r = new Hono<AppEnv>();

  r.post("/auth/otp/start", async (c) => {
    const deps = c.get("deps");
    const actor = await projectActor(c);
    const body = await jsonBody(c, ["email", "phone"]);
    const { stateId } = await startSignIn(deps, actor, body);
    return c.json({ state_id: stateId });
  });

  r.post("/auth/otp/verify", async (c) => {
    const deps = c.get("deps");
    const actor = await projectActor(c);
    const body = await jsonBody(c, ["state_id", "otp"]);
    return c.json(await completeSignIn(deps, actor, { stateId: str(body, "state_id") ?? "", otp: str(body, "otp") ?? "" }));
  });

  // Re-authentication for the signed-in user (CONTRACT section 3): same session, new auth_time.
  r.post("/auth/reauthenticate/start", async (c) => {
    const actor = await userActor(c);
    const { stateId } = await startReauthentication(c.get("deps"), actor, await jsonBody(c, ["email", "phone"]));
    return c.json({ state_id: stateId });
  });

  r.post("/auth/reauthenticate/verify", async (c) => {
    const actor = await userActor(c);
    const body = await jsonBody(c, ["state_id", "otp"]);
    return c.json(await completeReauthentication(c.get("deps"), actor, { stateId: str(body, "state_id"), otp: str(body, "otp") }));
  });

  r.post("/auth/reauthenticate/passkey", async (c) => {
    const actor = await userActor(c);
    const body = await jsonBody(c, ["response"]);
    return c.json(await reauthenticateWithPasskey(c.get("deps"), actor, { response: body.response }));
  });

  const info = async (c: import("hono").Context<AppEnv>) => {
    const deps = c.get("deps");
    const actor = await authenticateToken(deps, bearerToken(c.req.header("authorization")), c.get("clientAddress"));
    return c.json(await userinfo(deps, actor.projectId, actor.user.accountId));
  };
  r.get("/oauth/userinfo", info);
  r.post("/oauth/userinfo", info);

  r.get("/.well-known/jwks.json", (c) => c.json(c.get("deps").keys.jwks(), 200, { "Cache-Control": "public, max-age=300" }));
  r.get("/.well-known/openid-configuration", (c) => {
    const issuer = c.get("deps").keys.issuer;
    return c.json({
      issuer,
      jwks_uri: `${issuer}/.well-known/jwks.json`,
      userinfo_endpoint: `${issuer}/oauth/userinfo`,
      response_types_supported: ["token", "id_token"],
      subject_types_supported: ["public"],
      id_token_signing_alg_values_supported: ["ES256"],
      scopes_supported: ["openid", "profile", "email", "phone"],
      claims_supported: ["sub", "email", "email_verified", "phone_number", "phone_number_verified", "name", "updated_at", "sid"],
    });
  });
  return r;
}
