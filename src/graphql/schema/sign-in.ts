import { OTP_TTL_MS } from "../../auth/otp.ts";
import { completeSignIn, SIGN_IN_ERRORS, signOut, startSignIn, type TokenResponse } from "../../auth/sign-in.ts";
import { ACCESS_TOKEN_TTL_SECONDS } from "../../auth/tokens.ts";
import * as E from "../../errors.ts";
import { builder } from "../builder.ts";
import { resultOf } from "./errors.ts";
import { NEEDS } from "./root.ts";

const OTP_MINUTES = OTP_TTL_MS / 60_000;

export const StateIdPayload = builder.objectRef<{ stateId: string }>("OtpChallenge").implement({
  description: "An OTP was sent; complete the flow with this state id and the code.",
  fields: (t) => ({
    stateId: t.exposeString("stateId", {
      description: `Names this code's flow: send it back with the code to the mutation that completes it, within ${OTP_MINUTES} minutes.`,
    }),
  }),
});

export const TokenPayload = builder.objectRef<TokenResponse>("SignInTokens").implement({
  description: "The tokens of a signed-in session. Send `accessToken` as `Authorization: Bearer`, together with the API key.",
  fields: (t) => ({
    accessToken: t.exposeString("access_token", {
      description: "The access token (a signed JWT) for `Authorization: Bearer`; its `sid` claim is the session's id.",
    }),
    idToken: t.exposeString("id_token", {
      description: "The OpenID Connect ID token (a signed JWT): the account's claims, with `auth_time` and `amr` saying when and how the session last authenticated.",
    }),
    tokenType: t.exposeString("token_type", { description: "Always `Bearer`." }),
    expiresIn: t.exposeInt("expires_in", { description: `Seconds until both tokens expire (${ACCESS_TOKEN_TTL_SECONDS}).` }),
    accountId: t.exposeString("account_id", {
      description: "The account signed into: always a primary (an identifier of a merged secondary signs into its primary).",
    }),
  }),
});

/** The arguments naming one identifier, of which exactly one is given; `purpose` ends "The e-mail address …". */
export function identifierArgs(purpose: string) {
  return builder.args((t) => ({
    email: t.string({ description: `The e-mail address ${purpose}. Give this or \`phone\`, not both.` }),
    phone: t.string({
      description: `The phone number ${purpose}, in E.164 (\`+\` and the country code, such as +12025550143; spaces and dashes are ignored). Give this or \`email\`, not both.`,
    }),
  }));
}

builder.mutationFields((t) => ({
  startSignIn: t.field({
    type: StateIdPayload,
    authScopes: { project: true },
    description: `Sends a 6-digit sign-in code, valid ${OTP_MINUTES} minutes, to an e-mail address or phone number; completeSignIn checks it. ${NEEDS.project}`,
    args: identifierArgs("to send the code to"),
    errors: { types: [...SIGN_IN_ERRORS.start], union: resultOf("The OtpChallenge") },
    resolve: async (_, args, ctx) => startSignIn(ctx.deps, await ctx.project(), args),
  }),
  completeSignIn: t.field({
    type: TokenPayload,
    authScopes: { project: true },
    description: `Checks the code and signs in, opening a session: an identifier never seen before creates an account; a known one signs into its primary account. Retried with the same state and code after it worked, it answers the same session with fresh tokens. ${NEEDS.project}`,
    args: {
      stateId: t.arg.string({ required: true, description: "The stateId startSignIn returned." }),
      otp: t.arg.string({ required: true, description: "The 6-digit code that was sent." }),
    },
    errors: { types: [...SIGN_IN_ERRORS.complete], union: resultOf("The SignInTokens") },
    resolve: async (_, args, ctx) => completeSignIn(ctx.deps, await ctx.project(), args),
  }),
  signOut: t.boolean({
    authScopes: { user: true },
    description: `Ends the session making the request: its tokens fail from their next request. Always true. ${NEEDS.user}`,
    resolve: async (_, __, ctx) => signOut(ctx.deps, await ctx.user()),
  }),
}));
