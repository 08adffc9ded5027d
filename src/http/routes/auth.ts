import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { authenticateToken, bearerToken } from "../../auth/authenticate.ts";
import { projectActor, userActor } from "../credentials.ts";
import { PASSKEY_ERRORS, reauthenticateWithPasskey } from "../../auth/passkeys.ts";
import { completeReauthentication, REAUTHENTICATION_ERRORS, startReauthentication } from "../../auth/reauthenticate.ts";
import { completeSignIn, SIGN_IN_ERRORS, startSignIn, userinfo } from "../../auth/sign-in.ts";
import { claimsForScopes } from "../../auth/accounts.ts";
import { discoveryDocument, ROUTES } from "../../oidc/provider.ts";
import type { AppEnv } from "../env.ts";
import { jsonBody as readJsonBody, str } from "../body.ts";
import {
  AuthenticationResponse,
  BODY_ERRORS,
  errorResponses,
  identifierBody,
  jsonBody,
  ok,
  otpBody,
  PROJECT_ERRORS,
  registerBodies,
  SECURITY,
  StateId,
  TokenResponse,
  USER_ERRORS,
} from "../api-schemas.ts";

const SignInStart = identifierBody("SignInStartBody", "the identifier to sign in with; an identifier never seen before creates an account");
const SignInVerify = otpBody("SignInVerifyBody", "the state_id from /auth/otp/start and the code sent");
const ReauthStart = identifierBody("ReauthenticationStartBody", "one of the signed-in account's own identifiers");
const ReauthVerify = otpBody("ReauthenticationVerifyBody", "the state_id from /auth/reauthenticate/start and the code sent");
const ReauthPasskey = jsonBody("ReauthenticationPasskeyBody", z.strictObject({ response: AuthenticationResponse }), {
  required: true,
  description: "an assertion for options from /auth/passkey/sign-in/options, by a passkey of this account",
});

const signIn = { tags: ["Sign-in"] };
const reauth = { tags: ["Re-authentication"] };
const oidc = { tags: ["OpenID Connect"] };

const otpStart = createRoute({
  ...signIn,
  method: "post",
  path: "/auth/otp/start",
  operationId: "startSignIn",
  summary: "Send a sign-in code to an e-mail address or phone",
  security: SECURITY.apiKey,
  request: SignInStart.request,
  responses: { ...ok(StateId, "the code was sent"), ...errorResponses(PROJECT_ERRORS, BODY_ERRORS, SIGN_IN_ERRORS.start) },
});

const otpVerify = createRoute({
  ...signIn,
  method: "post",
  path: "/auth/otp/verify",
  operationId: "completeSignIn",
  summary: "Sign in with the code: tokens for the primary account",
  description: "A retry with the same state_id and code after a success answers the same sign-in while the state lives.",
  security: SECURITY.apiKey,
  request: SignInVerify.request,
  responses: { ...ok(TokenResponse, "signed in"), ...errorResponses(PROJECT_ERRORS, BODY_ERRORS, SIGN_IN_ERRORS.complete) },
});

const reauthStart = createRoute({
  ...reauth,
  method: "post",
  path: "/auth/reauthenticate/start",
  operationId: "startReauthentication",
  summary: "Send a code to one of the account's own identifiers to confirm it's the user",
  security: SECURITY.user,
  request: ReauthStart.request,
  responses: {
    ...ok(StateId, "the code was sent"),
    ...errorResponses(USER_ERRORS, BODY_ERRORS, REAUTHENTICATION_ERRORS.start),
  },
});

const reauthVerify = createRoute({
  ...reauth,
  method: "post",
  path: "/auth/reauthenticate/verify",
  operationId: "completeReauthentication",
  summary: "Re-authenticate with the code: the same session (same sid) with a new auth_time",
  security: SECURITY.user,
  request: ReauthVerify.request,
  responses: { ...ok(TokenResponse, "re-authenticated; fresh tokens for the same session"), ...errorResponses(USER_ERRORS, BODY_ERRORS, REAUTHENTICATION_ERRORS.complete) },
});

const reauthPasskey = createRoute({
  ...reauth,
  method: "post",
  path: "/auth/reauthenticate/passkey",
  operationId: "reauthenticateWithPasskey",
  summary: "Re-authenticate with a passkey of this account",
  security: SECURITY.user,
  request: ReauthPasskey.request,
  responses: { ...ok(TokenResponse, "re-authenticated; fresh tokens for the same session"), ...errorResponses(USER_ERRORS, BODY_ERRORS, PASSKEY_ERRORS.reauthenticate) },
});

const Userinfo = z
  .object({
    sub: z.string().openapi({ description: "the primary account id" }),
    email: z.string().optional(),
    email_verified: z.boolean().optional(),
    phone_number: z.string().optional().openapi({ description: "only when the primary account itself has a phone" }),
    phone_number_verified: z.boolean().optional(),
    name: z.string().nullable().optional().openapi({ description: "with the `profile` scope" }),
    updated_at: z.number().int().optional().openapi({ description: "seconds since the epoch; with the `profile` scope" }),
  })
  .openapi("Userinfo", {
    description:
      "The claims of the scopes the token was granted: `openid` alone gives `sub`; `email`, `phone` and `profile` add theirs. A token of linkgate's own sign-in (/auth/otp/verify, passkeys) carries every claim.",
  });

const userinfoRoute = (method: "get" | "post") =>
  createRoute({
    ...oidc,
    method,
    path: ROUTES.userinfo,
    operationId: `${method}Userinfo`,
    summary: "The signed-in user's OpenID Connect claims",
    description: "Takes the access token alone, like any OpenID Connect userinfo endpoint; no API key.",
    security: SECURITY.accessToken,
    responses: { ...ok(Userinfo, "the primary account's claims"), ...errorResponses(["Unauthenticated", "ServiceUnavailable"]) },
  });

const Jwks = z
  .object({
    keys: z.array(
      z.looseObject({ kty: z.string(), kid: z.string(), alg: z.string(), use: z.literal("sig") }).openapi({ description: "a public JSON Web Key" }),
    ),
  })
  .openapi("JWKS");

const jwks = createRoute({
  ...oidc,
  method: "get",
  path: ROUTES.jwks,
  operationId: "jwks",
  summary: "The public keys that verify access and ID tokens",
  responses: ok(Jwks, "the key set; cacheable for 5 minutes"),
});

const OpenIdConfiguration = z
  .object({
    issuer: z.string(),
    authorization_endpoint: z.string(),
    token_endpoint: z.string(),
    revocation_endpoint: z.string(),
    end_session_endpoint: z.string(),
    jwks_uri: z.string(),
    userinfo_endpoint: z.string(),
    response_types_supported: z.array(z.string()),
    response_modes_supported: z.array(z.string()),
    grant_types_supported: z.array(z.string()),
    code_challenge_methods_supported: z.array(z.string()),
    token_endpoint_auth_methods_supported: z.array(z.string()),
    revocation_endpoint_auth_methods_supported: z.array(z.string()),
    authorization_response_iss_parameter_supported: z.boolean(),
    claims_parameter_supported: z.boolean(),
    subject_types_supported: z.array(z.string()),
    id_token_signing_alg_values_supported: z.array(z.string()),
    scopes_supported: z.array(z.string()),
    claims_supported: z.array(z.string()),
  })
  .openapi("OpenIdConfiguration");

const discovery = createRoute({
  ...oidc,
  method: "get",
  path: "/.well-known/openid-configuration",
  operationId: "openidConfiguration",
  summary: "OpenID Connect discovery",
  responses: ok(OpenIdConfiguration, "the provider's metadata"),
});

export function authRoutes() {
  const r = new OpenAPIHono<AppEnv>();
  registerBodies(r.openAPIRegistry, [SignInStart, SignInVerify, ReauthStart, ReauthVerify, ReauthPasskey]);

  r.openapi(otpStart, async (c) => {
    const deps = c.get("deps");
    const actor = await projectActor(c);
    const body = await readJsonBody(c, SignInStart.fields);
    const { stateId } = await startSignIn(deps, actor, body);
    return c.json({ state_id: stateId }, 200);
  });

  r.openapi(otpVerify, async (c) => {
    const deps = c.get("deps");
    const actor = await projectActor(c);
    const body = await readJsonBody(c, SignInVerify.fields);
    return c.json(await completeSignIn(deps, actor, { stateId: str(body, "state_id") ?? "", otp: str(body, "otp") ?? "" }), 200);
  });

  // Re-authentication for the signed-in user (docs/security.md): same session, new auth_time.
  r.openapi(reauthStart, async (c) => {
    const actor = await userActor(c);
    const { stateId } = await startReauthentication(c.get("deps"), actor, await readJsonBody(c, ReauthStart.fields));
    return c.json({ state_id: stateId }, 200);
  });

  r.openapi(reauthVerify, async (c) => {
    const actor = await userActor(c);
    const body = await readJsonBody(c, ReauthVerify.fields);
    return c.json(await completeReauthentication(c.get("deps"), actor, { stateId: str(body, "state_id"), otp: str(body, "otp") }), 200);
  });

  r.openapi(reauthPasskey, async (c) => {
    const actor = await userActor(c);
    const body = await readJsonBody(c, ReauthPasskey.fields);
    return c.json(await reauthenticateWithPasskey(c.get("deps"), actor, { response: body.response }), 200);
  });

  const info = async (c: Context<AppEnv>) => {
    const deps = c.get("deps");
    const actor = await authenticateToken(deps, bearerToken(c.req.header("authorization")), c.get("clientAddress"));
    return c.json(claimsForScopes(await userinfo(deps, actor.projectId, actor.user.accountId), actor.user.app?.scopes), 200);
  };
  r.openapi(userinfoRoute("get"), info);
  r.openapi(userinfoRoute("post"), info);

  r.openapi(jwks, (c) => c.json(c.get("deps").keys.jwks() as z.infer<typeof Jwks>, 200, { "Cache-Control": "public, max-age=300" }));
  r.openapi(discovery, (c) => c.json(discoveryDocument(c.get("deps").keys.issuer), 200));
  return r;
}
