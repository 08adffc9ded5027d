import { LINK_ERRORS, removeLink, requestLink, unmerge, verifyLink } from "../../linking/service.ts";
import { builder } from "../builder.ts";
import { resultOf } from "./errors.ts";
import { NEEDS } from "./root.ts";
import { identifierArgs, StateIdPayload } from "./sign-in.ts";

const LinkOutcome = builder.enumType("LinkOutcome", {
  description: "What verifying a link did; linkgate decides it, not the client.",
  values: {
    attached: { description: "nobody had the identifier: it was added to this account" },
    merged: {
      description: "another account had signed up with it: that account was merged into this one, which is now its primary",
    },
  },
});

export const VerifyLinkPayload = builder.objectRef<{ message: string; outcome: "attached" | "merged" }>("VerifyLinkPayload").implement({
  description: "The identifier is linked to the signed-in account.",
  fields: (t) => ({
    message: t.exposeString("message", { description: "A confirmation in words for people." }),
    outcome: t.expose("outcome", { type: LinkOutcome, description: "Whether the identifier was attached or its account merged." }),
  }),
});

const MessagePayload = builder.objectRef<{ message: string }>("MessagePayload").implement({
  description: "The change was made.",
  fields: (t) => ({ message: t.exposeString("message", { description: "A confirmation in words for people." }) }),
});

builder.mutationFields((t) => ({
  requestLink: t.field({
    type: StateIdPayload,
    authScopes: { user: true },
    description: `Starts adding an e-mail address or phone number to the signed-in account: sends a code to it, which verifyLink checks. Whether somebody else holds it is not revealed here. ${NEEDS.recentUser}`,
    args: identifierArgs("to link"),
    errors: { types: [...LINK_ERRORS.request], union: resultOf("The OtpChallenge") },
    resolve: async (_, args, ctx) => requestLink(ctx.deps, await ctx.user(), args),
  }),
  verifyLink: t.field({
    type: VerifyLinkPayload,
    authScopes: { user: true },
    description: `Checks the code and links: attaches the identifier if nobody had it, or merges the account that signed up with it into this one. Emits user.identifier.linked or user.merged, each with user.updated. Retried with the same state and code after it worked, it answers the same. ${NEEDS.user}`,
    args: {
      stateId: t.arg.string({ required: true, description: "The stateId requestLink returned." }),
      otp: t.arg.string({ required: true, description: "The 6-digit code that was sent." }),
    },
    errors: { types: [...LINK_ERRORS.verify], union: resultOf("The VerifyLinkPayload") },
    resolve: async (_, args, ctx) => verifyLink(ctx.deps, await ctx.user(), args),
  }),
  removeLink: t.field({
    type: MessagePayload,
    authScopes: { user: true },
    description: `Removes an identifier from the account. Removing one of the merged secondary's identifiers separates the two accounts, as unmerge does. Emits user.identifier.unlinked (or user.unmerged), with user.updated. ${NEEDS.recentUser}`,
    args: {
      ...identifierArgs("to remove"),
      external: t.arg.string({ description: "An external sign-in to remove, as Identifier.value shows it (`<issuer>#<subject>`); instead of email or phone." }),
    },
    errors: { types: [...LINK_ERRORS.remove], union: resultOf("The MessagePayload") },
    resolve: async (_, args, ctx) => removeLink(ctx.deps, await ctx.user(), args),
  }),
  unmerge: t.field({
    type: MessagePayload,
    authScopes: { user: true },
    description: `Separates the account from its merged secondary, which comes back exactly as it was (id, identifiers, profile, passkeys). What was added to this account by way of the secondary while merged (an external sign-in confirmed through its address, an address attached or a passkey registered by a session whose last proof was the secondary's, and what was proven through those) is removed, never handed to either side; the sessions signed in or re-authenticated with the secondary's identifiers or passkeys end, the caller's included. Emits user.unmerged, user.identifier.unlinked for each identifier removed, user.updated with passkey_removed for each passkey removed, then user.updated. ${NEEDS.recentUser}`,
    errors: { types: [...LINK_ERRORS.unmerge], union: resultOf("The MessagePayload") },
    resolve: async (_, __, ctx) => unmerge(ctx.deps, await ctx.user()),
  }),
}));
