import { completeSignIn, signOut, startSignIn, type TokenResponse } from "../../auth/sign-in.ts";
import * as E from "../../errors.ts";
import { builder } from "../builder.ts";
import { identifierErrors } from "./errors.ts";

export const StateIdPayload = builder.objectRef<{ stateId: string }>("OtpChallenge").implement({
  description: "An OTP was sent; complete the flow with this state id and the code.",
  fields: (t) => ({ stateId: t.exposeString("stateId") }),
});

export const TokenPayload = builder.objectRef<TokenResponse>("SignInTokens").implement({
  fields: (t) => ({
    accessToken: t.exposeString("access_token"),
    idToken: t.exposeString("id_token"),
    tokenType: t.exposeString("token_type"),
    expiresIn: t.exposeInt("expires_in"),
    accountId: t.exposeString("account_id"),
  }),
});

builder.mutationFields((t) => ({
  startSignIn: t.field({
    type: StateIdPayload,
    authScopes: { project: true },
    args: { email: t.arg.string(), phone: t.arg.string() },
    errors: { types: identifierErrors },
    resolve: async (_, args, ctx) => startSignIn(ctx.deps, await ctx.project(), args),
  }),
  completeSignIn: t.field({
    type: TokenPayload,
    authScopes: { project: true },
    args: { stateId: t.arg.string({ required: true }), otp: t.arg.string({ required: true }) },
    errors: { types: [E.OTPInvalid, E.RateLimited] },
    resolve: async (_, args, ctx) => completeSignIn(ctx.deps, await ctx.project(), args),
  }),
  signOut: t.boolean({
    authScopes: { user: true },
    resolve: async (_, __, ctx) => signOut(ctx.deps, await ctx.user()),
  }),
}));
