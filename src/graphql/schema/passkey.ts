import {
  finishPasskeyRegistration,
  finishPasskeySignIn,
  reauthenticateWithPasskey,
  removePasskey,
  renamePasskey,
  startPasskeyRegistration,
  startPasskeySignIn,
} from "../../auth/passkeys.ts";
import * as E from "../../errors.ts";
import { builder } from "../builder.ts";
import { TokenPayload } from "./sign-in.ts";

const Passkey = builder.prismaObject("Passkey", {
  description: "A passkey (WebAuthn credential) of the account. Signing in with it lands on the account's primary.",
  fields: (t) => ({
    id: t.exposeID("id"),
    name: t.exposeString("name", { description: "the name its owner gave it" }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    lastUsedAt: t.expose("lastUsedAt", { type: "DateTime", nullable: true, description: "null until it first signs in" }),
    deviceType: t.exposeString("deviceType", { description: "singleDevice, or multiDevice for a synced passkey" }),
    backedUp: t.exposeBoolean("backedUp", { description: "whether the passkey is synced to a backup (a password manager or platform account)" }),
  }),
});

builder.prismaObjectFields("Account", (t) => ({
  passkeys: t.relatedConnection("passkeys", {
    description: "the account's passkeys, oldest first",
    cursor: "id",
    maxSize: 50,
    defaultSize: 20,
    query: () => ({ orderBy: [{ createdAt: "asc" }, { id: "asc" }] }),
  }),
}));

const PasskeyCreationOptions = builder.objectRef<{ options: unknown }>("PasskeyCreationOptions").implement({
  fields: (t) => ({
    options: t.field({
      type: "JSON",
      description: "WebAuthn creation options for navigator.credentials.create (or @simplewebauthn/browser's startRegistration); the challenge lives 5 minutes",
      resolve: (p) => p.options,
    }),
  }),
});

const RemovePasskeyPayload = builder.objectRef<{ removedId: string }>("RemovePasskeyPayload").implement({
  fields: (t) => ({ removedId: t.exposeID("removedId") }),
});

builder.mutationFields((t) => ({
  startPasskeyRegistration: t.field({
    type: PasskeyCreationOptions,
    authScopes: { user: true },
    description: "starts registering a passkey for the signed-in account; needs a recent sign-in or re-authentication",
    errors: { types: [E.ReauthenticationRequired] },
    resolve: async (_, __, ctx) => ({ options: await startPasskeyRegistration(ctx.deps, await ctx.user()) }),
  }),
  finishPasskeyRegistration: t.prismaField({
    type: Passkey,
    authScopes: { user: true },
    description: "registers the passkey the browser created; emits user.passkey.registered",
    args: { response: t.arg({ type: "JSON", required: true }), name: t.arg.string({ description: "defaults to \"Passkey\"" }) },
    errors: { types: [E.PasskeyInvalid, E.InvalidRequest] },
    resolve: async (query, _, args, ctx) => {
      const passkey = await finishPasskeyRegistration(ctx.deps, await ctx.user(), { response: args.response, name: args.name });
      return ctx.deps.prisma.passkey.findUniqueOrThrow({ ...query, where: { id: passkey.id } });
    },
  }),
  startPasskeySignIn: t.field({
    type: "JSON",
    authScopes: { project: true },
    description: "WebAuthn request options for a discoverable passkey (no identifier typed); the challenge lives 5 minutes",
    resolve: async (_, __, ctx) => startPasskeySignIn(ctx.deps, await ctx.project()),
  }),
  finishPasskeySignIn: t.field({
    type: TokenPayload,
    authScopes: { project: true },
    description: "signs in with the browser's assertion: the same tokens as completeSignIn; emits user.passkey.login and user.authentication.success",
    args: { response: t.arg({ type: "JSON", required: true }) },
    errors: { types: [E.PasskeyInvalid] },
    resolve: async (_, args, ctx) => finishPasskeySignIn(ctx.deps, await ctx.project(), { response: args.response }),
  }),
  reauthenticateWithPasskey: t.field({
    type: TokenPayload,
    authScopes: { user: true },
    description: "re-authenticates the current session with a passkey of this account (options from startPasskeySignIn): same session, new auth_time",
    args: { response: t.arg({ type: "JSON", required: true }) },
    errors: { types: [E.PasskeyInvalid] },
    resolve: async (_, args, ctx) => reauthenticateWithPasskey(ctx.deps, await ctx.user(), { response: args.response }),
  }),
  renamePasskey: t.prismaField({
    type: Passkey,
    authScopes: { user: true },
    args: { id: t.arg.id({ required: true }), name: t.arg.string({ required: true }) },
    errors: { types: [E.NotFound, E.InvalidRequest] },
    resolve: async (query, _, args, ctx) => {
      const renamed = await renamePasskey(ctx.deps, await ctx.user(), { id: String(args.id), name: args.name });
      return ctx.deps.prisma.passkey.findUniqueOrThrow({ ...query, where: { id: renamed.id } });
    },
  }),
  removePasskey: t.field({
    type: RemovePasskeyPayload,
    authScopes: { user: true },
    description: "removes one of the account's passkeys; emits user.updated",
    args: { id: t.arg.id({ required: true }) },
    errors: { types: [E.NotFound, E.ReauthenticationRequired] },
    resolve: async (_, args, ctx) => removePasskey(ctx.deps, await ctx.user(), { id: String(args.id) }),
  }),
}));
