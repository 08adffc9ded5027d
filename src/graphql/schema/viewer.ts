import { deleteAccount, PROFILE_ERRORS, updateProfile } from "../../auth/profile.ts";
import { ENDED } from "../../auth/sessions.ts";
import { Unauthenticated } from "../../errors.ts";
import type { UserActor } from "../../deps.ts";
import type { LockedAccount } from "../../db/locks.ts";
import { leavingOnUnmerge } from "../../linking/service.ts";
import { builder } from "../builder.ts";
import type { GraphQLContext } from "../context.ts";
import { accountField, MergeRole } from "./account.ts";
import { resultOf } from "./errors.ts";
import { NEEDS } from "./root.ts";

// Enum values are written as stored and as the REST API and the webhook events spell them,
// lower case (ApiKeyKind predates this and keeps its upper-case names).
const IdentifierKind = builder.enumType("IdentifierKind", {
  description: "What an identifier is.",
  values: {
    email: { description: "an e-mail address" },
    phone: { description: "a phone number, in E.164" },
    external: { description: "a sign-in at an external identity provider (Google, GitHub, …): the value is `<issuer>#<subject>`" },
  },
});
const IdentifierOrigin = builder.enumType("IdentifierOrigin", {
  description: "How an identifier came to be on its account.",
  values: { own: { description: "the account signed up with it" }, attached: { description: "added by linking" } },
});

type ExternalProfileShape = { email: string | null; emailVerified: boolean | null; name: string | null; providerName: string | null };
const ExternalProfile = builder.objectRef<ExternalProfileShape>("ExternalProfile").implement({
  description: "What an external identity provider last said of the user (profile claims only).",
  fields: (t) => ({
    providerName: t.exposeString("providerName", { nullable: true, description: "The provider's display name; null once the provider was deleted." }),
    email: t.exposeString("email", { nullable: true, description: "The e-mail address the provider gave." }),
    emailVerified: t.exposeBoolean("emailVerified", { nullable: true, description: "Whether the provider said it verified that address." }),
    name: t.exposeString("name", { nullable: true, description: "The name the provider gave." }),
  }),
});

builder.prismaObject("Identifier", {
  description: "An e-mail address, phone number or external sign-in (Google, GitHub, …) that signs into the account it is on.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "The identifier's id." }),
    kind: t.expose("kind", { type: IdentifierKind, description: "Whether it is an e-mail address, a phone number or an external sign-in." }),
    value: t.exposeString("value", {
      description: "The address: an e-mail address in lower case (its domain in ASCII, punycode for an internationalized one), a phone number in E.164, or for an external sign-in `<issuer>#<subject>` (the provider's user id, never its e-mail).",
    }),
    externalProfile: t.field({
      type: ExternalProfile,
      nullable: true,
      description: "For an external sign-in: the provider's latest profile claims. They describe the user and decide nothing.",
      select: { external: { include: { provider: true } } },
      resolve: (i) => i.external && { ...i.external, providerName: i.external.provider?.displayName ?? null },
    }),
    origin: t.expose("origin", { type: IdentifierOrigin, description: "Whether the account signed up with it or it was added by linking." }),
    leavesOnUnmerge: t.boolean({
      description:
        "True for one proven through the merged secondary: an external sign-in confirmed through its address, or an identifier added by a session signed in with it. An unmerge removes it, and it does not count as the account's own last way to sign in.",
      select: { account: { select: { id: true, mergeRole: true, mergedWithId: true } } },
      resolve: async (i, _, ctx) => (await leavingOf(ctx, i.account)).has(i.id),
    }),
    createdAt: t.expose("createdAt", { type: "DateTime", description: "When it came to this account." }),
  }),
});

const leaving = new WeakMap<GraphQLContext, Map<string, Promise<Set<string>>>>();

/** What an unmerge would take from the account, worked out once per request (each identifier asks). */
function leavingOf(ctx: GraphQLContext, account: { id: string; mergeRole: string | null; mergedWithId: string | null }): Promise<Set<string>> {
  let byAccount = leaving.get(ctx);
  if (!byAccount) leaving.set(ctx, (byAccount = new Map()));
  let found = byAccount.get(account.id);
  if (!found) {
    const locked = { id: account.id, merge_role: account.mergeRole as LockedAccount["merge_role"], merged_with_id: account.mergedWithId };
    byAccount.set(account.id, (found = leavingOnUnmerge(ctx.deps.prisma, locked)));
  }
  return found;
}

/**
 * The secondary of a merge, as the primary sees it. A type of its own with no way back to an
 * account: the merge relation points both ways, so a recursive type would let one query walk
 * primary → secondary → primary … as deep as it likes.
 */
export const MergedAccount = builder.prismaObject("Account", {
  variant: "MergedAccount",
  description:
    "The account merged into the viewer's (its secondary), as it stands: unmerge gives it back exactly so, and removes from the viewer's account what was proven through it while merged (the viewer's identifiers mark those leavesOnUnmerge). It has no way back to the viewer.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "The secondary's own account id, which it keeps." }),
    name: t.exposeString("name", accountField.name),
    email: t.field(accountField.email),
    phoneNumber: t.field(accountField.phoneNumber),
    identifiers: t.relation("identifiers", {
      description: "Its identifiers, oldest first: each signs into the viewer's account while merged.",
      query: { orderBy: { createdAt: "asc" } },
    }),
    mergeRole: t.expose("mergeRole", { type: MergeRole, nullable: true, description: "Always `secondary` (the field is nullable because an account outside a merge has no role)." }),
    createdAt: t.expose("createdAt", accountField.createdAt),
    updatedAt: t.expose("updatedAt", accountField.updatedAt),
    mergedAt: t.expose("mergedAt", { type: "DateTime", nullable: true, description: "When it was merged into the viewer's account." }),
  }),
});

const Account = builder.prismaObject("Account", {
  description: "A user's account in this project: the signed-in (primary) account, with its identifiers, passkeys and sessions.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "The account id: the tokens' `sub` and the events' `user.user_id`." }),
    name: t.exposeString("name", accountField.name),
    email: t.field(accountField.email),
    phoneNumber: t.field(accountField.phoneNumber),
    status: t.expose("status", accountField.status),
    createdAt: t.expose("createdAt", accountField.createdAt),
    updatedAt: t.expose("updatedAt", accountField.updatedAt),
    lastLoginAt: t.expose("lastLoginAt", accountField.lastLoginAt),
    identifiers: t.relation("identifiers", {
      description: "Its own identifiers (signed up with or attached), oldest first; a merged secondary's are under mergedSecondary.",
      query: { orderBy: { createdAt: "asc" } },
    }),
    mergeRole: t.expose("mergeRole", {
      type: MergeRole,
      nullable: true,
      description: "`primary` while another account is merged into this one; null when not merged. The viewer is never a secondary.",
    }),
    mergedAt: t.expose("mergedAt", accountField.mergedAt),
    mergedSecondary: t.relation("mergedWith", {
      type: MergedAccount,
      nullable: true,
      description: "The account merged into this one (the viewer is always the primary); null when not merged.",
    }),
  }),
});

/**
 * The signed-in account as a query selects it. One deleted after the token's session was found
 * live (a deleteAccount on another device committing meanwhile) ended that session: the ended
 * session's answer (docs/authentication.md, "Sessions"), where findFirstOrThrow answered
 * INTERNAL_SERVER_ERROR.
 */
async function signedInAccount<Q extends object>(ctx: GraphQLContext, query: Q, actor: UserActor) {
  const account = await ctx.deps.prisma.account.findFirst({ ...query, where: { id: actor.user.accountId, projectId: actor.projectId } });
  if (!account) throw new Unauthenticated(ENDED);
  return account;
}

builder.queryFields((t) => ({
  viewer: t.prismaField({
    type: Account,
    authScopes: { user: true },
    description: `The signed-in (primary) account, its identifiers and its merged secondary. ${NEEDS.user}`,
    resolve: async (query, _, __, ctx) => {
      return signedInAccount(ctx, query, await ctx.user());
    },
  }),
}));

const DeletePayload = builder.objectRef<{ deleted: boolean }>("DeleteAccountPayload").implement({
  description: "The account is deleted.",
  fields: (t) => ({ deleted: t.exposeBoolean("deleted", { description: "Always true." }) }),
});

builder.mutationFields((t) => ({
  updateProfile: t.prismaField({
    type: Account,
    authScopes: { user: true },
    description: `Sets the account's display name; emits user.updated when the name changes. At most 30 changes in 10 minutes per account. ${NEEDS.recentUser}`,
    args: { name: t.arg.string({ required: true, description: "At most 200 characters, with no control or bidirectional override characters; blank (or only spaces) clears the name." }) },
    errors: { types: [...PROFILE_ERRORS.update], union: resultOf("The updated Account") },
    resolve: async (query, _, args, ctx) => {
      const actor = await ctx.user();
      await updateProfile(ctx.deps, actor, args);
      return signedInAccount(ctx, query, actor);
    },
  }),
  deleteAccount: t.field({
    type: DeletePayload,
    authScopes: { user: true },
    description: `Deletes the signed-in account with its identifiers, passkeys and sessions; emits user.deleted. A merged account must be unmerged first. ${NEEDS.recentUser}`,
    errors: { types: [...PROFILE_ERRORS.delete], union: resultOf("The DeleteAccountPayload") },
    resolve: async (_, __, ctx) => deleteAccount(ctx.deps, await ctx.user()),
  }),
}));
