import * as E from "../../errors.ts";
import { removeLink, requestLink, unmerge, verifyLink } from "../../linking/service.ts";
import { builder } from "../builder.ts";
import { identifierErrors } from "./errors.ts";
import { StateIdPayload } from "./sign-in.ts";

const LinkOutcome = builder.enumType("LinkOutcome", { values: ["attached", "merged"] as const });

const VerifyLinkPayload = builder.objectRef<{ message: string; outcome: "attached" | "merged" }>("VerifyLinkPayload").implement({
  fields: (t) => ({ message: t.exposeString("message"), outcome: t.expose("outcome", { type: LinkOutcome }) }),
});

const MessagePayload = builder.objectRef<{ message: string }>("MessagePayload").implement({
  fields: (t) => ({ message: t.exposeString("message") }),
});

builder.mutationFields((t) => ({
  requestLink: t.field({
    type: StateIdPayload,
    authScopes: { user: true },
    args: { email: t.arg.string(), phone: t.arg.string() },
    errors: { types: [...identifierErrors, E.CannotLinkSelf, E.ReauthenticationRequired] },
    resolve: async (_, args, ctx) => requestLink(ctx.deps, await ctx.user(), args),
  }),
  verifyLink: t.field({
    type: VerifyLinkPayload,
    authScopes: { user: true },
    args: { stateId: t.arg.string({ required: true }), otp: t.arg.string({ required: true }) },
    errors: {
      types: [E.OTPInvalid, E.RateLimited, E.CannotLinkSelf, E.AlreadyLinked, E.TargetAlreadyLinked, E.TargetSecondaryIdentity],
    },
    resolve: async (_, args, ctx) => verifyLink(ctx.deps, await ctx.user(), args),
  }),
  removeLink: t.field({
    type: MessagePayload,
    authScopes: { user: true },
    args: { email: t.arg.string(), phone: t.arg.string() },
    errors: { types: [...identifierErrors, E.IdentifierNotLinked, E.LastIdentifier, E.ReauthenticationRequired] },
    resolve: async (_, args, ctx) => removeLink(ctx.deps, await ctx.user(), args),
  }),
  unmerge: t.field({
    type: MessagePayload,
    authScopes: { user: true },
    errors: { types: [E.NotMerged, E.ReauthenticationRequired] },
    resolve: async (_, __, ctx) => unmerge(ctx.deps, await ctx.user()),
  }),
}));
