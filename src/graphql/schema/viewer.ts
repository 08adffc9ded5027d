import { preferred } from "../../auth/accounts.ts";
import { deleteAccount, updateProfile } from "../../auth/profile.ts";
import * as E from "../../errors.ts";
import { builder } from "../builder.ts";

const IdentifierKind = builder.enumType("IdentifierKind", { values: ["email", "phone"] as const });
const IdentifierOrigin = builder.enumType("IdentifierOrigin", {
  values: { own: { description: "the account signed up with it" }, attached: { description: "added by linking" } },
});

builder.prismaObject("Identifier", {
  fields: (t) => ({
    id: t.exposeID("id"),
    kind: t.expose("kind", { type: IdentifierKind }),
    value: t.exposeString("value"),
    origin: t.expose("origin", { type: IdentifierOrigin }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

type WithIdentifiers = { identifiers: Parameters<typeof preferred>[0] };
const emailOf = (a: WithIdentifiers) => preferred(a.identifiers, "email")?.value ?? null;
const phoneOf = (a: WithIdentifiers) => preferred(a.identifiers, "phone")?.value ?? null;
const EMAIL_DESCRIPTION = "the e-mail tokens and events carry: the account's own, else its first attached";

/**
 * The secondary of a merge, as the primary sees it. A type of its own with no way back to an
 * account: the merge relation points both ways, so a recursive type would let one query walk
 * primary → secondary → primary … as deep as it likes.
 */
const MergedAccount = builder.prismaObject("Account", {
  variant: "MergedAccount",
  description: "the account merged into the viewer's",
  fields: (t) => ({
    id: t.exposeID("id"),
    name: t.exposeString("name", { nullable: true }),
    email: t.field({ type: "EmailAddress", nullable: true, description: EMAIL_DESCRIPTION, select: { identifiers: true }, resolve: emailOf }),
    phoneNumber: t.field({ type: "PhoneNumber", nullable: true, select: { identifiers: true }, resolve: phoneOf }),
    identifiers: t.relation("identifiers", { query: { orderBy: { createdAt: "asc" } } }),
    mergeRole: t.exposeString("mergeRole", { nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    mergedAt: t.expose("mergedAt", { type: "DateTime", nullable: true }),
  }),
});

const Account = builder.prismaObject("Account", {
  fields: (t) => ({
    id: t.exposeID("id"),
    name: t.exposeString("name", { nullable: true }),
    email: t.field({ type: "EmailAddress", nullable: true, description: EMAIL_DESCRIPTION, select: { identifiers: true }, resolve: emailOf }),
    phoneNumber: t.field({ type: "PhoneNumber", nullable: true, select: { identifiers: true }, resolve: phoneOf }),
    status: t.exposeString("status"),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    lastLoginAt: t.expose("lastLoginAt", { type: "DateTime", nullable: true }),
    identifiers: t.relation("identifiers", { query: { orderBy: { createdAt: "asc" } } }),
    mergeRole: t.exposeString("mergeRole", { nullable: true }),
    mergedAt: t.expose("mergedAt", { type: "DateTime", nullable: true }),
    mergedSecondary: t.relation("mergedWith", {
      type: MergedAccount,
      nullable: true,
      description: "the account merged into this one (the viewer is always the primary)",
    }),
  }),
});

builder.queryFields((t) => ({
  viewer: t.prismaField({
    type: Account,
    authScopes: { user: true },
    description: "the signed-in (primary) account, its identifiers and its merged secondary",
    resolve: async (query, _, __, ctx) => {
      const { projectId, user } = await ctx.user();
      return ctx.deps.prisma.account.findFirstOrThrow({ ...query, where: { id: user.accountId, projectId } });
    },
  }),
}));

const DeletePayload = builder.objectRef<{ deleted: boolean }>("DeleteAccountPayload").implement({
  fields: (t) => ({ deleted: t.exposeBoolean("deleted") }),
});

builder.mutationFields((t) => ({
  updateProfile: t.prismaField({
    type: Account,
    authScopes: { user: true },
    args: { name: t.arg.string({ required: true }) },
    errors: { types: [E.InvalidRequest] },
    resolve: async (query, _, args, ctx) => {
      const actor = await ctx.user();
      await updateProfile(ctx.deps, actor, args);
      return ctx.deps.prisma.account.findFirstOrThrow({ ...query, where: { id: actor.user.accountId, projectId: actor.projectId } });
    },
  }),
  deleteAccount: t.field({
    type: DeletePayload,
    authScopes: { user: true },
    errors: { types: [E.AccountMerged, E.ReauthenticationRequired] },
    resolve: async (_, __, ctx) => deleteAccount(ctx.deps, await ctx.user()),
  }),
}));
