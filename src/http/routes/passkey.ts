// Passkeys over REST (docs/authentication.md, passkeys): the same service as the GraphQL fields, with the
// WebAuthn options and responses as plain JSON.
import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { projectActor, userActor } from "../credentials.ts";
import {
  finishPasskeyRegistration,
  finishPasskeySignIn,
  listPasskeys,
  passkeyJson,
  removePasskey,
  renamePasskey,
  startPasskeyRegistration,
  startPasskeySignIn,
  PASSKEY_ERRORS,
} from "../../auth/passkeys.ts";
import type { AppEnv } from "../env.ts";
import { jsonBody, str } from "../body.ts";
import {
  AuthenticationResponse,
  BODY_ERRORS,
  CreationOptions,
  emptyBody,
  errorResponses,
  jsonBody as describeBody,
  ok,
  Passkey,
  PROJECT_ERRORS,
  RegistrationResponse,
  registerBodies,
  RequestOptions,
  SECURITY,
  TokenResponse,
  USER_ERRORS,
} from "../api-schemas.ts";

const user = userActor;
const project = projectActor;

const passkeyName = z.string().min(1).max(100).openapi({ description: "1 to 100 characters", example: "Work laptop" });
const passkeyId = z.string().openapi({ description: "a passkey's id (psk_…)" });

const RegistrationOptions = emptyBody("PasskeyRegistrationOptionsBody");
const RegistrationVerify = describeBody(
  "PasskeyRegistrationVerifyBody",
  z.strictObject({ response: RegistrationResponse, name: passkeyName.optional().openapi({ description: "1 to 100 characters; `Passkey` when left out" }) }),
  { required: true, description: "what navigator.credentials.create() gave for the options, and a name for the passkey" },
);
const SignInOptions = emptyBody("PasskeySignInOptionsBody");
const SignInVerify = describeBody("PasskeySignInVerifyBody", z.strictObject({ response: AuthenticationResponse }), {
  required: true,
  description: "what navigator.credentials.get() gave for the options",
});
const Rename = describeBody("PasskeyRenameBody", z.strictObject({ id: passkeyId, name: passkeyName }), { required: true, description: "the passkey and its new name" });
const Remove = describeBody("PasskeyRemoveBody", z.strictObject({ id: passkeyId }), { required: true, description: "the passkey to remove" });

const tags = ["Passkeys"];
const PasskeyResult = z.object({ passkey: Passkey });

const registrationOptions = createRoute({
  tags,
  method: "post",
  path: "/auth/passkey/registration/options",
  operationId: "startPasskeyRegistration",
  summary: "Creation options for registering a passkey on the signed-in account",
  description: "Needs a recent sign-in or re-authentication. The challenge is single use and expires in 5 minutes.",
  security: SECURITY.user,
  request: RegistrationOptions.request,
  responses: {
    ...ok(CreationOptions, "pass these to navigator.credentials.create()"),
    ...errorResponses(USER_ERRORS, BODY_ERRORS, PASSKEY_ERRORS.startRegistration),
  },
});

const registrationVerify = createRoute({
  tags,
  method: "post",
  path: "/auth/passkey/registration/verify",
  operationId: "finishPasskeyRegistration",
  summary: "Register the passkey the authenticator created",
  security: SECURITY.user,
  request: RegistrationVerify.request,
  responses: { ...ok(PasskeyResult, "registered (event user.passkey.registered)"), ...errorResponses(USER_ERRORS, BODY_ERRORS, PASSKEY_ERRORS.finishRegistration) },
});

const signInOptions = createRoute({
  tags,
  method: "post",
  path: "/auth/passkey/sign-in/options",
  operationId: "startPasskeySignIn",
  summary: "Request options for signing in with a discoverable passkey (no identifier typed)",
  description: "The same options re-authenticate a signed-in user (/auth/reauthenticate/passkey).",
  security: SECURITY.apiKey,
  request: SignInOptions.request,
  responses: { ...ok(RequestOptions, "pass these to navigator.credentials.get()"), ...errorResponses(PROJECT_ERRORS, BODY_ERRORS, PASSKEY_ERRORS.startSignIn) },
});

const signInVerify = createRoute({
  tags,
  method: "post",
  path: "/auth/passkey/sign-in/verify",
  operationId: "finishPasskeySignIn",
  summary: "Sign in with the passkey's assertion: tokens for the primary account",
  security: SECURITY.apiKey,
  request: SignInVerify.request,
  responses: { ...ok(TokenResponse, "signed in"), ...errorResponses(PROJECT_ERRORS, BODY_ERRORS, PASSKEY_ERRORS.finishSignIn) },
});

const list = createRoute({
  tags,
  method: "get",
  path: "/auth/passkey/list",
  operationId: "listPasskeys",
  summary: "The passkeys that sign in to the signed-in account, oldest first",
  description:
    "`passkeys`: the account's own. `merged_secondary_passkeys`: its merged secondary's, which sign in to it while merged (empty when not merged); rename and remove take them too, and an unmerge gives back those left.",
  security: SECURITY.user,
  responses: {
    ...ok(z.object({ passkeys: z.array(Passkey), merged_secondary_passkeys: z.array(Passkey) }).openapi("PasskeyList"), "the passkeys"),
    ...errorResponses(USER_ERRORS),
  },
});

const rename = createRoute({
  tags,
  method: "post",
  path: "/auth/passkey/rename",
  operationId: "renamePasskey",
  summary: "Rename a passkey that signs in to the signed-in account (its own or its merged secondary's)",
  security: SECURITY.user,
  request: Rename.request,
  responses: { ...ok(PasskeyResult, "renamed"), ...errorResponses(USER_ERRORS, BODY_ERRORS, PASSKEY_ERRORS.rename) },
});

const remove = createRoute({
  tags,
  method: "post",
  path: "/auth/passkey/remove",
  operationId: "removePasskey",
  summary: "Remove a passkey that signs in to the signed-in account (its own or its merged secondary's)",
  description: "Needs a recent sign-in or re-authentication.",
  security: SECURITY.user,
  request: Remove.request,
  responses: {
    ...ok(z.object({ removed_id: z.string() }).openapi("PasskeyRemoved"), "removed"),
    ...errorResponses(USER_ERRORS, BODY_ERRORS, PASSKEY_ERRORS.remove),
  },
});

export function passkeyRoutes() {
  const r = new OpenAPIHono<AppEnv>();
  registerBodies(r.openAPIRegistry, [RegistrationOptions, RegistrationVerify, SignInOptions, SignInVerify, Rename, Remove]);

  r.openapi(registrationOptions, async (c) => {
    const actor = await user(c);
    await jsonBody(c, RegistrationOptions.fields);
    return c.json(await startPasskeyRegistration(c.get("deps"), actor), 200);
  });

  r.openapi(registrationVerify, async (c) => {
    const actor = await user(c);
    const body = await jsonBody(c, RegistrationVerify.fields);
    const passkey = await finishPasskeyRegistration(c.get("deps"), actor, { response: body.response, name: body.name });
    return c.json({ passkey: passkeyJson(passkey) }, 200);
  });

  r.openapi(signInOptions, async (c) => {
    const actor = await project(c);
    await jsonBody(c, SignInOptions.fields);
    return c.json(await startPasskeySignIn(c.get("deps"), actor), 200);
  });

  r.openapi(signInVerify, async (c) => {
    const actor = await project(c);
    const body = await jsonBody(c, SignInVerify.fields);
    return c.json(await finishPasskeySignIn(c.get("deps"), actor, { response: body.response }), 200);
  });

  r.openapi(list, async (c) => {
    const actor = await user(c);
    const { own, mergedSecondary } = await listPasskeys(c.get("deps"), actor);
    return c.json({ passkeys: own.map(passkeyJson), merged_secondary_passkeys: mergedSecondary.map(passkeyJson) }, 200);
  });

  r.openapi(rename, async (c) => {
    const actor = await user(c);
    const body = await jsonBody(c, Rename.fields);
    const renamed = await renamePasskey(c.get("deps"), actor, { id: str(body, "id") ?? "", name: body.name });
    return c.json({ passkey: passkeyJson(renamed) }, 200);
  });

  r.openapi(remove, async (c) => {
    const actor = await user(c);
    const body = await jsonBody(c, Remove.fields);
    return c.json({ removed_id: (await removePasskey(c.get("deps"), actor, { id: str(body, "id") ?? "" })).removedId }, 200);
  });
  return r;
}
