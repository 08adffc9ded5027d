import type { CredentialDeviceType } from "@simplewebauthn/server";
import {
  CHALLENGE_TTL_MS,
  finishPasskeyRegistration,
  finishPasskeySignIn,
  reauthenticateWithPasskey,
  removePasskey,
  renamePasskey,
  startPasskeyRegistration,
  startPasskeySignIn,
  PASSKEY_ERRORS,
} from "../../auth/passkeys.ts";
import * as E from "../../errors.ts";
import { builder } from "../builder.ts";
import { boundedPage, DEFAULT_PAGE, MAX_PAGE } from "../pages.ts";
import { pageOf } from "./connections.ts";
import { resultOf } from "./errors.ts";
import { NEEDS } from "./root.ts";
import { TokenPayload } from "./sign-in.ts";
import { MergedAccount } from "./viewer.ts";

const CHALLENGE_MINUTES = CHALLENGE_TTL_MS / 60_000;

// Spelled as WebAuthn (and the REST API's device_type) spell them.
const PasskeyDeviceType = builder.enumType("PasskeyDeviceType", {
  description: "Whether a passkey lives on one device or is synced between devices, as its authenticator reported when it was registered.",
  values: {
    singleDevice: { description: "bound to one authenticator (a security key, or a device that does not sync passkeys)" },
    multiDevice: { description: "synced between the owner's devices (by a password manager or a platform account)" },
  } satisfies Record<CredentialDeviceType, { description: string }>,
});

const Passkey = builder.prismaObject("Passkey", {
  description: "A passkey (WebAuthn credential) of the account. Signing in with it lands on the account's primary.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "The passkey's id (not its WebAuthn credential id)." }),
    name: t.exposeString("name", { description: "The name its owner gave it, 1 to 100 characters." }),
    createdAt: t.expose("createdAt", { type: "DateTime", description: "When it was registered." }),
    lastUsedAt: t.expose("lastUsedAt", {
      type: "DateTime",
      nullable: true,
      description: "When it last signed in or re-authenticated; null until it first does.",
    }),
    deviceType: t.field({
      type: PasskeyDeviceType,
      description: "Whether it lives on one device or is synced.",
      select: { deviceType: true },
      // Written only from the verified registration, whose type is CredentialDeviceType.
      resolve: (p) => p.deviceType as CredentialDeviceType,
    }),
    backedUp: t.exposeBoolean("backedUp", {
      description: "Whether the passkey was backed up (synced to a password manager or platform account) when it was registered.",
    }),
  }),
});

/** An account's passkeys as a connection, oldest first; `whose` says whose they are, `note` what else to know. */
const passkeysOf = (whose: string, note: string) => ({
  description: `${whose}, oldest first; \`first\` is at most ${MAX_PAGE} (default ${DEFAULT_PAGE}). ${note}`,
  cursor: "id" as const,
  maxSize: boundedPage,
  defaultSize: DEFAULT_PAGE,
  query: () => ({ orderBy: [{ createdAt: "asc" as const }, { id: "asc" as const }] }),
});

builder.prismaObjectFields("Account", (t) => ({
  passkeys: t.relatedConnection(
    "passkeys",
    passkeysOf("The account's own passkeys", "A merged secondary's, which sign into this account too, are under mergedSecondary.passkeys."),
    ...pageOf("the account's passkeys", "A passkey"),
  ),
}));

builder.prismaObjectFields(MergedAccount, (t) => ({
  passkeys: t.relatedConnection(
    "passkeys",
    passkeysOf("Its passkeys", "Each signs into the viewer's account while merged; renamePasskey and removePasskey take them as they take the viewer's own."),
    ...pageOf("the merged secondary's passkeys", "A passkey"),
  ),
}));

const PasskeyCreationOptions = builder.objectRef<{ options: unknown }>("PasskeyCreationOptions").implement({
  description: "What the browser needs to create a passkey for the signed-in account.",
  fields: (t) => ({
    options: t.field({
      type: "JSON",
      description: `WebAuthn creation options for navigator.credentials.create (or @simplewebauthn/browser's startRegistration); the challenge lives ${CHALLENGE_MINUTES} minutes.`,
      resolve: (p) => p.options,
    }),
  }),
});

const RemovePasskeyPayload = builder.objectRef<{ removedId: string }>("RemovePasskeyPayload").implement({
  description: "The passkey is removed: it no longer signs in.",
  fields: (t) => ({ removedId: t.exposeID("removedId", { description: "The id of the passkey removed." }) }),
});

const assertionArg = (from: string) =>
  builder.args((t) => ({
    response: t.field({
      type: "JSON",
      required: true,
      description: `The PublicKeyCredential navigator.credentials.get returned, as JSON (@simplewebauthn/browser's startAuthentication gives it so), for options from ${from}.`,
    }),
  }));

builder.mutationFields((t) => ({
  startPasskeyRegistration: t.field({
    type: PasskeyCreationOptions,
    authScopes: { user: true },
    description: `Starts registering a passkey for the signed-in account: creation options whose challenge lives ${CHALLENGE_MINUTES} minutes, for finishPasskeyRegistration. ${NEEDS.recentUser}`,
    errors: { types: [...PASSKEY_ERRORS.startRegistration], union: resultOf("The PasskeyCreationOptions") },
    resolve: async (_, __, ctx) => ({ options: await startPasskeyRegistration(ctx.deps, await ctx.user()) }),
  }),
  finishPasskeyRegistration: t.prismaField({
    type: Passkey,
    authScopes: { user: true },
    description: `Registers the passkey the browser created; emits user.passkey.registered and notifies the account's addresses. ${NEEDS.user}`,
    args: {
      response: t.arg({
        type: "JSON",
        required: true,
        description: "The PublicKeyCredential navigator.credentials.create returned, as JSON (@simplewebauthn/browser's startRegistration gives it so).",
      }),
      name: t.arg.string({ description: "A name for it, 1 to 100 characters, with no control or bidirectional override characters; \"Passkey\" when not given." }),
    },
    errors: { types: [...PASSKEY_ERRORS.finishRegistration], union: resultOf("The new Passkey") },
    resolve: async (query, _, args, ctx) => {
      const passkey = await finishPasskeyRegistration(ctx.deps, await ctx.user(), { response: args.response, name: args.name });
      // removed by another request in between: an answer, not a 500
      const row = await ctx.deps.prisma.passkey.findUnique({ ...query, where: { id: passkey.id } });
      if (!row) throw new E.PasskeyInvalid("that passkey was removed as it was registered");
      return row;
    },
  }),
  startPasskeySignIn: t.field({
    type: "JSON",
    authScopes: { project: true },
    description: `WebAuthn request options (for navigator.credentials.get) for a discoverable passkey, so no identifier is typed; the challenge lives ${CHALLENGE_MINUTES} minutes. They serve finishPasskeySignIn and reauthenticateWithPasskey. ${NEEDS.project}`,
    resolve: async (_, __, ctx) => startPasskeySignIn(ctx.deps, await ctx.project()),
  }),
  finishPasskeySignIn: t.field({
    type: TokenPayload,
    authScopes: { project: true },
    description: `Signs in with the browser's assertion, opening a session on the passkey's primary account: the same tokens as completeSignIn; emits user.passkey.login and user.authentication.success. ${NEEDS.project}`,
    args: assertionArg("startPasskeySignIn"),
    errors: { types: [...PASSKEY_ERRORS.finishSignIn], union: resultOf("The SignInTokens") },
    resolve: async (_, args, ctx) => finishPasskeySignIn(ctx.deps, await ctx.project(), { response: args.response }),
  }),
  reauthenticateWithPasskey: t.field({
    type: TokenPayload,
    authScopes: { user: true },
    description: `Re-authenticates the current session with a passkey that signs into this account (its own, or its merged secondary's): the same session with a new auth_time, and fresh tokens. ${NEEDS.user}`,
    args: assertionArg("startPasskeySignIn"),
    errors: { types: [...PASSKEY_ERRORS.reauthenticate], union: resultOf("The SignInTokens") },
    resolve: async (_, args, ctx) => reauthenticateWithPasskey(ctx.deps, await ctx.user(), { response: args.response }),
  }),
  renamePasskey: t.prismaField({
    type: Passkey,
    authScopes: { user: true },
    description: `Renames a passkey that signs into the account: its own, or its merged secondary's. ${NEEDS.user}`,
    args: {
      id: t.arg.id({ required: true, description: "The passkey's id." }),
      name: t.arg.string({ required: true, description: "The new name, 1 to 100 characters, with no control or bidirectional override characters." }),
    },
    errors: { types: [...PASSKEY_ERRORS.rename], union: resultOf("The renamed Passkey") },
    resolve: async (query, _, args, ctx) => {
      const renamed = await renamePasskey(ctx.deps, await ctx.user(), { id: String(args.id), name: args.name });
      const row = await ctx.deps.prisma.passkey.findUnique({ ...query, where: { id: renamed.id } });
      if (!row) throw new E.NotFound("no such passkey"); // removed by another request in between
      return row;
    },
  }),
  removePasskey: t.field({
    type: RemovePasskeyPayload,
    authScopes: { user: true },
    description: `Removes a passkey that signs into the account (its own, or its merged secondary's, which an unmerge then does not give back); ends the sessions it signed in, emits user.updated and notifies the account's addresses. ${NEEDS.recentUser}`,
    args: { id: t.arg.id({ required: true, description: "The passkey's id." }) },
    errors: { types: [...PASSKEY_ERRORS.remove], union: resultOf("The RemovePasskeyPayload") },
    resolve: async (_, args, ctx) => removePasskey(ctx.deps, await ctx.user(), { id: String(args.id) }),
  }),
}));
