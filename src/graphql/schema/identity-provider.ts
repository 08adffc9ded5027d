// External identity providers (docs/external-identities.md): the project's providers, managed
// with the secret key, and signing in or linking through one. The rules live in
// src/auth/external/ and src/linking/external.ts; REST calls the same functions.
import { PRESETS } from "../../auth/external/presets.ts";
import { createProvider, deleteProvider, listProviders, updateProvider, type ProviderView } from "../../auth/external/providers.ts";
import { completeExternalSignIn, confirmExternalSignIn, confirmExternalSignInWithPasskey, EXTERNAL_SIGN_IN_ERRORS, startExternalSignIn, type VerificationRequired } from "../../auth/external/sign-in.ts";
import { completeExternalReauthentication, EXTERNAL_REAUTHENTICATION_ERRORS, startExternalReauthentication } from "../../auth/external/reauthenticate.ts";
import type { TokenResponse } from "../../auth/sign-in.ts";
import * as E from "../../errors.ts";
import { EXTERNAL_LINK_ERRORS, startExternalLink, verifyExternalLink } from "../../linking/external.ts";
import { builder } from "../builder.ts";
import { resultOf } from "./errors.ts";
import { VerifyLinkPayload } from "./linking.ts";
import { NEEDS } from "./root.ts";
import { TokenPayload } from "./sign-in.ts";

const IdentityProviderPreset = builder.enumType("IdentityProviderPreset", {
  description: "What kind of provider: a preset fills in the issuer and scopes (Microsoft needs its tenant's issuer).",
  values: {
    OIDC: { value: "oidc", description: "any OpenID Connect provider: give its issuer" },
    GOOGLE: { value: "google", description: `Google (${PRESETS.google.issuer})` },
    APPLE: { value: "apple", description: `Sign in with Apple (${PRESETS.apple.issuer}); the client secret is the JWT Apple asks for` },
    MICROSOFT: { value: "microsoft", description: "Microsoft Entra ID: issuer https://login.microsoftonline.com/<tenant id>/v2.0" },
    GITLAB: { value: "gitlab", description: `GitLab (${PRESETS.gitlab.issuer}, or a self-managed instance's URL as issuer)` },
    GITHUB: { value: "github", description: "GitHub (OAuth 2.0 and its user API); issuer is https://github.com or an Enterprise Server's URL" },
  } as const,
});

const IdentityProvider = builder.objectRef<ProviderView>("IdentityProvider").implement({
  description: "An external identity provider users of the project sign in with (a button on the sign-in page).",
  fields: (t) => ({
    id: t.exposeID("id", { description: "Its id in this API (idp_…)." }),
    slug: t.exposeString("slug", { description: "Its name in URLs and in the REST API's `provider` field." }),
    preset: t.field({ type: IdentityProviderPreset, description: "What kind of provider it is.", resolve: (p) => p.preset }),
    displayName: t.exposeString("displayName", { description: "What the sign-in button says after “Continue with”." }),
    issuer: t.exposeString("issuer", { description: "The OpenID Connect issuer (GitHub: its web base URL)." }),
    clientId: t.exposeString("clientId", { description: "The client id registered at the provider." }),
    scopes: t.stringList({ description: "The scopes asked for.", resolve: (p) => p.scopes.split(" ") }),
    hasClientSecret: t.exposeBoolean("hasClientSecret", { description: "Whether a client secret is set (it is stored sealed and never shown)." }),
    callbackUrl: t.exposeString("callbackUrl", { description: "The redirect URI to register at the provider: this provider's own, <issuer>/auth/external/<id>/callback." }),
    sharedCallback: t.exposeBoolean("sharedCallback", {
      description:
        "True only for a provider made before each provider had a callback of its own: it still uses <issuer>/auth/external/callback, where another provider of this gateway could be sent its codes. Register <issuer>/auth/external/<id>/callback at the provider, then update it with sharedCallback: false.",
    }),
    createdAt: t.expose("createdAt", { type: "DateTime", description: "When it was added." }),
    updatedAt: t.expose("updatedAt", { type: "DateTime", description: "When its settings last changed." }),
  }),
});

const IdentityProviderInput = builder.inputType("IdentityProviderInput", {
  description: "A provider's settings. Creating one needs `preset` and `clientId` (and `issuer` for OIDC and MICROSOFT); an update changes only the fields given.",
  fields: (t) => ({
    preset: t.field({ type: IdentityProviderPreset, description: "The kind of provider." }),
    slug: t.string({ description: "1 to 40 characters of a-z, 0-9 and -; the preset's name when not given on create." }),
    displayName: t.string({ description: "Up to 60 characters; the preset's name when not given on create." }),
    issuer: t.string({ description: "The issuer URL (https, no query or fragment); presets fill it in." }),
    clientId: t.string({ description: "The client id the provider gave." }),
    clientSecret: t.string({ description: "The client secret the provider gave; stored sealed, never shown again. Leave it out to keep the current one." }),
    scopes: t.stringList({ description: "The scopes to ask for; an OpenID Connect provider's must include openid. The preset's when not given." }),
    sharedCallback: t.boolean({
      description: "Only false, on an update: moves a provider made before per-provider callbacks to its own callbackUrl (register that URL at the provider first). There is no way back.",
    }),
  }),
});

const ExternalStart = builder.objectRef<{ state_id: string; authorization_url: string }>("ExternalStart").implement({
  description: "Send the browser to authorizationUrl; keep stateId for the completion, which needs it together with the code the browser brings back.",
  fields: (t) => ({
    stateId: t.exposeString("state_id", { description: "Keep it in the page that started (not in the URL)." }),
    authorizationUrl: t.exposeString("authorization_url", { description: "The provider's sign-in page." }),
  }),
});

const EmailVerificationRequired = builder.objectRef<VerificationRequired>("EmailVerificationRequired").implement({
  description:
    "The provider asserts a verified e-mail address that an account of this project holds: nothing was created or linked. A code went to that address; confirmExternalSignIn signs into that account and adds this sign-in to it.",
  fields: (t) => ({
    stateId: t.exposeString("state_id", { description: "For confirmExternalSignIn, with the code." }),
    destination: t.exposeString("destination", { description: "The address the code went to, masked." }),
  }),
});

type Outcome = TokenResponse | VerificationRequired;
const ExternalSignInOutcome = builder.objectRef<Outcome>("ExternalSignInOutcome").implement({
  description: "Signed in (`tokens`), or an e-mail to prove first (`emailVerification`): exactly one is set.",
  fields: (t) => ({
    tokens: t.field({ type: TokenPayload, nullable: true, description: "The tokens, when signed in.", resolve: (o) => ("verification_required" in o ? null : o) }),
    emailVerification: t.field({
      type: EmailVerificationRequired,
      nullable: true,
      description: "Set when the e-mail the provider asserts must be proven first.",
      resolve: (o) => ("verification_required" in o ? o : null),
    }),
  }),
});

const DeleteIdentityProviderPayload = builder.objectRef<ProviderView>("DeleteIdentityProviderPayload").implement({
  description: "The provider is deleted: its sign-ins in progress end; identities it added stay on their accounts but no longer sign in.",
  fields: (t) => ({ deletedId: t.exposeID("id", { description: "The id of the provider deleted." }) }),
});

const startArgs = (t: Parameters<Parameters<typeof builder.mutationFields>[0]>[0]) => ({
  provider: t.arg.string({ required: true, description: "The provider's slug." }),
  redirectUri: t.arg.string({ required: true, description: "Where the browser comes back with `code`: the hosted /login page, or a redirect URI of a first-party OAuth client." }),
});
const completeArgs = (t: Parameters<Parameters<typeof builder.mutationFields>[0]>[0]) => ({
  stateId: t.arg.string({ required: true, description: "The stateId the start returned." }),
  code: t.arg.string({ required: true, description: "The one-time code the browser brought back." }),
});

builder.queryFields((t) => ({
  identityProviders: t.field({
    type: [IdentityProvider],
    authScopes: { secret: true },
    description: `The project's external identity providers, oldest first. ${NEEDS.secret}`,
    resolve: async (_, __, ctx) => listProviders(ctx.deps, await ctx.secret()),
  }),
}));

builder.mutationFields((t) => ({
  createIdentityProvider: t.field({
    type: IdentityProvider,
    authScopes: { secret: true },
    description: `Adds an external identity provider; register its callbackUrl at the provider. ${NEEDS.secret}`,
    args: { input: t.arg({ type: IdentityProviderInput, required: true, description: "Its preset, client id and secret." }) },
    errors: { types: [E.InvalidRequest], union: resultOf("The IdentityProvider") },
    resolve: async (_, { input }, ctx) => createProvider(ctx.deps, await ctx.secret(), input),
  }),
  updateIdentityProvider: t.field({
    type: IdentityProvider,
    authScopes: { secret: true },
    description: `Changes the settings given of a provider. ${NEEDS.secret}`,
    args: {
      id: t.arg.id({ required: true, description: "The provider's id (idp_…)." }),
      input: t.arg({ type: IdentityProviderInput, required: true, description: "The settings to change." }),
    },
    errors: { types: [E.ProviderNotFound, E.InvalidRequest], union: resultOf("The IdentityProvider") },
    resolve: async (_, { id, input }, ctx) => updateProvider(ctx.deps, await ctx.secret(), String(id), input),
  }),
  deleteIdentityProvider: t.field({
    type: DeleteIdentityProviderPayload,
    authScopes: { secret: true },
    description: `Deletes a provider. ${NEEDS.secret}`,
    args: { id: t.arg.id({ required: true, description: "The provider's id (idp_…)." }) },
    errors: { types: [E.ProviderNotFound], union: resultOf("The DeleteIdentityProviderPayload") },
    resolve: async (_, { id }, ctx) => deleteProvider(ctx.deps, await ctx.secret(), String(id)),
  }),
  startExternalSignIn: t.field({
    type: ExternalStart,
    authScopes: { project: true },
    description: `Starts signing in with an external identity provider. ${NEEDS.project}`,
    args: startArgs(t),
    errors: { types: [...EXTERNAL_SIGN_IN_ERRORS.start], union: resultOf("The ExternalStart") },
    resolve: async (_, args, ctx) => startExternalSignIn(ctx.deps, await ctx.project(), args),
  }),
  completeExternalSignIn: t.field({
    type: ExternalSignInOutcome,
    authScopes: { project: true },
    description: `Finishes an external sign-in: a known identity signs into its primary account, an unknown one creates an account, unless its verified e-mail belongs to an account (then EmailVerificationRequired). ${NEEDS.project}`,
    args: completeArgs(t),
    errors: { types: [...EXTERNAL_SIGN_IN_ERRORS.complete], union: resultOf("The ExternalSignInOutcome") },
    resolve: async (_, args, ctx) => completeExternalSignIn(ctx.deps, await ctx.project(), args) as Promise<Outcome>,
  }),
  confirmExternalSignIn: t.field({
    type: TokenPayload,
    authScopes: { project: true },
    description: `Proves the e-mail of EmailVerificationRequired with its code: signs into that account and adds the external sign-in to it. ${NEEDS.project}`,
    args: {
      stateId: t.arg.string({ required: true, description: "The stateId of EmailVerificationRequired." }),
      otp: t.arg.string({ required: true, description: "The 6-digit code that was sent." }),
    },
    errors: { types: [...EXTERNAL_SIGN_IN_ERRORS.confirm], union: resultOf("The SignInTokens") },
    resolve: async (_, args, ctx) => confirmExternalSignIn(ctx.deps, await ctx.project(), args),
  }),
  confirmExternalSignInWithPasskey: t.field({
    type: TokenPayload,
    authScopes: { project: true },
    description: `Proves it is the account of EmailVerificationRequired's e-mail with one of its passkeys (an assertion for startPasskeySignIn's options) instead of the code: signs in and adds the external sign-in. ${NEEDS.project}`,
    args: {
      stateId: t.arg.string({ required: true, description: "The stateId of EmailVerificationRequired." }),
      response: t.arg({ type: "JSON", required: true, description: "The WebAuthn assertion (navigator.credentials.get), as JSON." }),
    },
    errors: { types: [...EXTERNAL_SIGN_IN_ERRORS.confirmWithPasskey], union: resultOf("The SignInTokens") },
    resolve: async (_, args, ctx) => confirmExternalSignInWithPasskey(ctx.deps, await ctx.project(), args),
  }),
  startExternalReauthentication: t.field({
    type: ExternalStart,
    authScopes: { user: true },
    description: `Starts confirming it's the user by signing in again at the provider of one of the account's external sign-ins. ${NEEDS.user}`,
    args: startArgs(t),
    errors: { types: [...EXTERNAL_REAUTHENTICATION_ERRORS.start], union: resultOf("The ExternalStart") },
    resolve: async (_, args, ctx) => startExternalReauthentication(ctx.deps, await ctx.user(), args),
  }),
  completeExternalReauthentication: t.field({
    type: TokenPayload,
    authScopes: { user: true },
    description: `Finishes it: when the provider signed in one of the account's own external identities, the same session gets a new auth_time. ${NEEDS.user}`,
    args: completeArgs(t),
    errors: { types: [...EXTERNAL_REAUTHENTICATION_ERRORS.complete], union: resultOf("The SignInTokens") },
    resolve: async (_, args, ctx) => completeExternalReauthentication(ctx.deps, await ctx.user(), args),
  }),
  startExternalLink: t.field({
    type: ExternalStart,
    authScopes: { user: true },
    description: `Starts adding an external identity to the signed-in account. ${NEEDS.recentUser}`,
    args: startArgs(t),
    errors: { types: [...EXTERNAL_LINK_ERRORS.start], union: resultOf("The ExternalStart") },
    resolve: async (_, args, ctx) => startExternalLink(ctx.deps, await ctx.user(), args),
  }),
  verifyExternalLink: t.field({
    type: VerifyLinkPayload,
    authScopes: { user: true },
    description: `Finishes adding an external identity: attach or merge, decided as for a code (CannotLinkSelf, TargetSecondaryIdentity, TargetAlreadyLinked, AlreadyLinked). ${NEEDS.user}`,
    args: completeArgs(t),
    errors: { types: [...EXTERNAL_LINK_ERRORS.verify], union: resultOf("The VerifyLinkPayload") },
    resolve: async (_, args, ctx) => verifyExternalLink(ctx.deps, await ctx.user(), args),
  }),
}));
