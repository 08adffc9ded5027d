// External identity providers over REST (docs/external-identities.md): the buttons a sign-in page
// shows, sign-in and linking through a provider, and the callback the provider sends the browser
// to. Thin: each route reads its body and calls the service function GraphQL calls too.
import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { publicProviders, SHARED_CALLBACK_PATH } from "../../auth/external/providers.ts";
import { completeExternalSignIn, confirmExternalSignIn, confirmExternalSignInWithPasskey, EXTERNAL_SIGN_IN_ERRORS, startExternalSignIn } from "../../auth/external/sign-in.ts";
import { finishCallback } from "../../auth/external/flows.ts";
import { completeExternalReauthentication, EXTERNAL_REAUTHENTICATION_ERRORS, startExternalReauthentication } from "../../auth/external/reauthenticate.ts";
import { EXTERNAL_LINK_ERRORS, startExternalLink, verifyExternalLink } from "../../linking/external.ts";
import { DomainError } from "../../errors.ts";
import { connectionHeaders, refuseHead, statusOf } from "../errors.ts";
import { errorPage, pageSecurityHeaders } from "../../oidc/pages.ts";
import { projectActor, userActor } from "../credentials.ts";
import type { AppEnv } from "../env.ts";
import { formBody, jsonBody as readJsonBody, str } from "../body.ts";
import { AuthenticationResponse, BODY_ERRORS, errorResponses, jsonBody, ok, otpBody, PROJECT_ERRORS, registerBodies, SECURITY, TokenResponse, USER_ERRORS } from "../api-schemas.ts";

const tags = { tags: ["External identities"] };

const startBody = (name: string, description: string) =>
  jsonBody(
    name,
    z.strictObject({
      provider: z.string().openapi({ description: "the provider's slug, as /auth/external/providers lists it", example: "google" }),
      redirect_uri: z.string().openapi({
        description: "where the browser returns with `code`: the hosted /login page, or a redirect URI of one of the project's first-party OAuth clients",
        example: "https://app.example.com/auth/callback",
      }),
    }),
    { required: true, description },
  );
const completeBody = (name: string, description: string) =>
  jsonBody(
    name,
    z.strictObject({
      state_id: z.string().openapi({ description: "the state_id the start answered (kept by the page that started)" }),
      code: z.string().openapi({ description: "the one-time `code` the browser brought back to redirect_uri" }),
    }),
    { required: true, description },
  );

const SignInStart = startBody("ExternalSignInStartBody", "the provider to sign in with, and where to come back");
const SignInComplete = completeBody("ExternalSignInCompleteBody", "the two halves of the flow: state_id from the start, code from the redirect");
const SignInConfirm = otpBody("ExternalSignInConfirmBody", "the state_id of verification_required and the code sent to that e-mail");
const SignInConfirmPasskey = jsonBody(
  "ExternalSignInConfirmPasskeyBody",
  z.strictObject({
    state_id: z.string().openapi({ description: "the state_id of verification_required" }),
    response: AuthenticationResponse,
  }),
  { required: true, description: "an assertion, for options from /auth/passkey/sign-in/options, by a passkey of the account that holds the e-mail" },
);
const ReauthStart = startBody("ExternalReauthenticationStartBody", "the provider of one of the account's external sign-ins, and where to come back");
const ReauthVerify = completeBody("ExternalReauthenticationVerifyBody", "the two halves of the flow: state_id from the start, code from the redirect");
const LinkStart = startBody("ExternalLinkStartBody", "the provider whose account to add, and where to come back");
const LinkVerify = completeBody("ExternalLinkVerifyBody", "the two halves of the flow: state_id from the start, code from the redirect");

const Started = z
  .object({
    state_id: z.string().openapi({ description: "keep it: the completion needs it with the code" }),
    authorization_url: z.string().openapi({ description: "send the browser here (the provider's sign-in page)" }),
  })
  .openapi("ExternalStarted");

const VerificationRequired = z
  .object({
    verification_required: z.literal("email"),
    state_id: z.string().openapi({ description: "for /auth/external/confirm with the code" }),
    destination: z.string().openapi({ description: "the e-mail address the code went to, masked", example: "a•••@example.com" }),
  })
  .openapi("ExternalVerificationRequired", {
    description:
      "The provider asserts a verified e-mail address that an account of this project holds: nothing was created or linked. A code went to that address; /auth/external/confirm signs into that account and adds this sign-in to it.",
  });

const Providers = z
  .object({
    providers: z.array(z.object({ slug: z.string(), display_name: z.string(), preset: z.string().openapi({ description: "google, apple, microsoft, gitlab, github or oidc" }) })),
  })
  .openapi("ExternalProviders");

const Linked = z.object({ message: z.literal("Account linked successfully"), outcome: z.enum(["attached", "merged"]) }).openapi("ExternalLinkVerified");

const route = <P extends string>(method: "get" | "post", path: P, operationId: string, summary: string, security: (typeof SECURITY)[keyof typeof SECURITY]) => ({
  ...tags,
  method,
  path,
  operationId,
  summary,
  security,
});

const providers = createRoute({
  ...route("get", "/auth/external/providers", "externalProviders", "The external identity providers a sign-in page offers", SECURITY.apiKey),
  responses: { ...ok(Providers, "the project's providers, oldest first"), ...errorResponses(PROJECT_ERRORS) },
});
const signInStart = createRoute({
  ...route("post", "/auth/external/start", "startExternalSignIn", "Start signing in with an external identity provider", SECURITY.apiKey),
  request: SignInStart.request,
  responses: {
    ...ok(Started, "send the browser to authorization_url"),
    ...errorResponses(PROJECT_ERRORS, BODY_ERRORS, EXTERNAL_SIGN_IN_ERRORS.start),
  },
});
const signInComplete = createRoute({
  ...route("post", "/auth/external/complete", "completeExternalSignIn", "Finish an external sign-in: tokens, or an e-mail to prove first", SECURITY.apiKey),
  description: "A retry with the same state_id and code after a success answers the same sign-in while the flow lives.",
  request: SignInComplete.request,
  responses: {
    200: {
      description: "signed in (tokens), or the e-mail the provider named must be proven first",
      content: { "application/json": { schema: z.union([TokenResponse, VerificationRequired]) } },
    },
    ...errorResponses(PROJECT_ERRORS, BODY_ERRORS, EXTERNAL_SIGN_IN_ERRORS.complete),
  },
});
const signInConfirm = createRoute({
  ...route("post", "/auth/external/confirm", "confirmExternalSignIn", "Prove the e-mail with its code: sign in, and add the external sign-in to that account", SECURITY.apiKey),
  request: SignInConfirm.request,
  responses: { ...ok(TokenResponse, "signed in; the external sign-in now signs into this account"), ...errorResponses(PROJECT_ERRORS, BODY_ERRORS, EXTERNAL_SIGN_IN_ERRORS.confirm) },
});
const signInConfirmPasskey = createRoute({
  ...route("post", "/auth/external/confirm/passkey", "confirmExternalSignInWithPasskey", "Prove it is the account of that e-mail with one of its passkeys instead of the code", SECURITY.apiKey),
  request: SignInConfirmPasskey.request,
  responses: { ...ok(TokenResponse, "signed in; the external sign-in now signs into this account"), ...errorResponses(PROJECT_ERRORS, BODY_ERRORS, EXTERNAL_SIGN_IN_ERRORS.confirmWithPasskey) },
});
const reauthStart = createRoute({
  ...route("post", "/auth/reauthenticate/external/start", "startExternalReauthentication", "Start confirming it's the user by signing in again at a provider", SECURITY.user),
  request: ReauthStart.request,
  responses: { ...ok(Started, "send the browser to authorization_url"), ...errorResponses(USER_ERRORS, BODY_ERRORS, EXTERNAL_REAUTHENTICATION_ERRORS.start) },
});
const reauthVerify = createRoute({
  ...route("post", "/auth/reauthenticate/external/verify", "completeExternalReauthentication", "Finish re-authenticating: the same session (same sid) with a new auth_time", SECURITY.user),
  request: ReauthVerify.request,
  responses: { ...ok(TokenResponse, "re-authenticated; fresh tokens for the same session"), ...errorResponses(USER_ERRORS, BODY_ERRORS, EXTERNAL_REAUTHENTICATION_ERRORS.complete) },
});
const linkStart = createRoute({
  ...route("post", "/users/link/external/start", "startExternalLink", "Start adding an external identity to the signed-in account", SECURITY.user),
  request: LinkStart.request,
  responses: {
    ...ok(Started, "send the browser to authorization_url"),
    ...errorResponses(USER_ERRORS, BODY_ERRORS, EXTERNAL_LINK_ERRORS.start),
  },
});
const linkVerify = createRoute({
  ...route("post", "/users/link/external/verify", "verifyExternalLink", "Finish adding an external identity: attach or merge, decided as for a code", SECURITY.user),
  request: LinkVerify.request,
  responses: { ...ok(Linked, "linked"), ...errorResponses(USER_ERRORS, BODY_ERRORS, EXTERNAL_LINK_ERRORS.verify) },
});

type C = Context<AppEnv>;

/** The provider's redirect: a browser's page, so every answer is a redirect or a page, never JSON. */
async function callback(c: C): Promise<Response> {
  const headers = { "cache-control": "no-store", "referrer-policy": "no-referrer", ...pageSecurityHeaders() };
  let params: URLSearchParams;
  try {
    params = c.req.method === "POST" ? await formBody(c.req.raw) : new URL(c.req.url).searchParams;
  } catch (err) {
    // a form_post answer too large, or cut off: a page too
    if (!(err instanceof DomainError)) throw err;
    return c.html(errorPage(err.code, err.message, "provider"), statusOf(err.code) as 400, { ...headers, ...connectionHeaders(err) });
  }
  const answer = await finishCallback(c.get("deps"), params, c.req.param("provider") ?? null);
  if ("redirect" in answer) return c.redirect(answer.redirect, 303);
  return c.html(errorPage("expired", answer.page.message, "expired"), answer.page.status, headers);
}

export function externalRoutes() {
  const r = new OpenAPIHono<AppEnv>();
  registerBodies(r.openAPIRegistry, [SignInStart, SignInComplete, SignInConfirm, SignInConfirmPasskey, ReauthStart, ReauthVerify, LinkStart, LinkVerify]);
  const pair = (body: Record<string, unknown>) => ({ stateId: str(body, "state_id") ?? "", code: str(body, "code") ?? "" });
  const start = (body: Record<string, unknown>) => ({ provider: body.provider, redirectUri: body.redirect_uri });

  r.openapi(providers, async (c) => c.json({ providers: await publicProviders(c.get("deps"), await projectActor(c)) }, 200));
  r.openapi(signInStart, async (c) => {
    const actor = await projectActor(c);
    return c.json(await startExternalSignIn(c.get("deps"), actor, start(await readJsonBody(c, SignInStart.fields))), 200);
  });
  r.openapi(signInComplete, async (c) => {
    const actor = await projectActor(c);
    return c.json(await completeExternalSignIn(c.get("deps"), actor, pair(await readJsonBody(c, SignInComplete.fields))), 200);
  });
  r.openapi(signInConfirm, async (c) => {
    const actor = await projectActor(c);
    const body = await readJsonBody(c, SignInConfirm.fields);
    return c.json(await confirmExternalSignIn(c.get("deps"), actor, { stateId: str(body, "state_id") ?? "", otp: str(body, "otp") ?? "" }), 200);
  });
  r.openapi(signInConfirmPasskey, async (c) => {
    const actor = await projectActor(c);
    const body = await readJsonBody(c, SignInConfirmPasskey.fields);
    return c.json(await confirmExternalSignInWithPasskey(c.get("deps"), actor, { stateId: body.state_id, response: body.response }), 200);
  });
  r.openapi(reauthStart, async (c) => {
    const actor = await userActor(c);
    return c.json(await startExternalReauthentication(c.get("deps"), actor, start(await readJsonBody(c, ReauthStart.fields))), 200);
  });
  r.openapi(reauthVerify, async (c) => {
    const actor = await userActor(c);
    return c.json(await completeExternalReauthentication(c.get("deps"), actor, pair(await readJsonBody(c, ReauthVerify.fields))), 200);
  });
  r.openapi(linkStart, async (c) => {
    const actor = await userActor(c);
    return c.json(await startExternalLink(c.get("deps"), actor, start(await readJsonBody(c, LinkStart.fields))), 200);
  });
  r.openapi(linkVerify, async (c) => {
    const actor = await userActor(c);
    return c.json(await verifyExternalLink(c.get("deps"), actor, pair(await readJsonBody(c, LinkVerify.fields))), 200);
  });
  // a HEAD (a link scanner, a prefetch) would have exchanged the code and used up the flow
  for (const path of [SHARED_CALLBACK_PATH, "/auth/external/:provider/callback"]) {
    r.on(["GET", "POST"], path, refuseHead("GET, POST"), callback);
  }
  return r;
}
