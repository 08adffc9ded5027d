// OpenID Connect clients of the project (docs/oidc.md); the rules live in src/oidc/clients.ts.
import * as E from "../../errors.ts";
import { createClient, deleteClient, rotateClientSecret, updateClient, type ClientWithSecret } from "../../oidc/clients.ts";
import { AUTHORIZED_APPS_LISTED, authorizedApps, revokeConsent, type AuthorizedApp as AuthorizedAppView } from "../../oidc/consents.ts";
import { builder } from "../builder.ts";
import { boundedPage, DEFAULT_PAGE, MAX_PAGE } from "../pages.ts";
import { cursorHeld, pageOf } from "./connections.ts";
import { resultOf } from "./errors.ts";
import { NEEDS } from "./root.ts";

const OAuthClientType = builder.enumType("OAuthClientType", {
  description: "How a client authenticates at the token endpoint.",
  values: {
    PUBLIC: { value: "public", description: "a single-page or mobile app: no secret (token_endpoint_auth_method none), PKCE alone proves the code is its own" },
    CONFIDENTIAL: { value: "confidential", description: "a server: a client secret, sent with client_secret_basic or client_secret_post" },
  },
});

export const OAuthClient = builder.prismaObject("OAuthClient", {
  description: "An app that signs the project's users in with OpenID Connect (authorization code with PKCE).",
  fields: (t) => ({
    id: t.exposeID("id", { description: "The client's id in this API (oac_…), for updating, rotating and deleting it." }),
    clientId: t.exposeString("clientId", { description: "The OAuth `client_id` the app sends (lgc_…)." }),
    name: t.exposeString("name", { description: "Its name, shown to users on the consent page." }),
    redirectUris: t.exposeStringList("redirectUris", {
      description: "Where codes may be sent, matched exactly (no trailing-slash, port or scheme leniency); also the allowed post-logout redirect URIs.",
    }),
    type: t.expose("type", { type: OAuthClientType, description: "PUBLIC (no secret) or CONFIDENTIAL (with a secret)." }),
    firstParty: t.exposeBoolean("firstParty", { description: "The project's own app: its users are not asked for consent." }),
    createdAt: t.expose("createdAt", { type: "DateTime", description: "When it was registered." }),
    updatedAt: t.expose("updatedAt", { type: "DateTime", description: "When its settings or secret last changed." }),
  }),
});

const OAuthClientInput = builder.inputType("OAuthClientInput", {
  description: "A client's settings. Creating one needs `name`, `redirectUris` and `type`; an update changes only the fields given.",
  fields: (t) => ({
    name: t.string({ description: "1 to 100 characters, with no control or bidirectional override characters; shown on the consent page." }),
    redirectUris: t.stringList({
      description: "1 to 20 absolute URIs without a fragment: https, http on a loopback host only, or an app's private-use scheme (com.example.app:/cb).",
    }),
    type: t.field({ type: OAuthClientType, description: "PUBLIC or CONFIDENTIAL; fixed once created." }),
    firstParty: t.boolean({ description: "True for the project's own apps, which skip consent; false when not given on create." }),
  }),
});

const OAuthClientSecretPayload = builder.objectRef<ClientWithSecret>("OAuthClientWithSecret").implement({
  description: "A client and, for a confidential one, its secret, shown this once (only its hash is stored).",
  fields: (t) => ({
    client: t.field({ type: OAuthClient, description: "The client.", resolve: (p) => p.client as never }),
    clientSecret: t.exposeString("clientSecret", {
      nullable: true,
      description: "The client secret (lgcs_…) for a CONFIDENTIAL client, shown on create and rotate only: store it now. Null for a PUBLIC client.",
    }),
  }),
});

const UpdateOAuthClientPayload = builder.objectRef<{ client: { id: string } }>("UpdateOAuthClientPayload").implement({
  description: "The client's settings changed.",
  fields: (t) => ({ client: t.field({ type: OAuthClient, description: "The client as it is now.", resolve: (p) => p.client as never }) }),
});

const DeleteOAuthClientPayload = builder.objectRef<{ id: string }>("DeleteOAuthClientPayload").implement({
  description: "The client is deleted; its codes, refresh tokens and remembered consents are gone.",
  fields: (t) => ({ deletedId: t.exposeID("id", { description: "The id of the client deleted." }) }),
});

builder.queryFields((t) => ({
  oauthClients: t.prismaConnection(
    {
      type: OAuthClient,
      cursor: "id",
      authScopes: { secret: true },
      description: `The project's OpenID Connect clients, oldest first; \`first\` is at most ${MAX_PAGE} (default ${DEFAULT_PAGE}). ${NEEDS.secret}`,
      defaultSize: DEFAULT_PAGE,
      maxSize: boundedPage,
      resolve: async (query, _, __, ctx) => {
        const { projectId } = await ctx.secret();
        if (!(await cursorHeld(query, (id) => ctx.deps.prisma.oAuthClient.count({ where: { projectId, id } })))) return [];
        return ctx.deps.prisma.oAuthClient.findMany({ ...query, where: { projectId }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
      },
    },
    ...pageOf("the project's OpenID Connect clients", "A client"),
  ),
}));

const AuthorizedApp = builder.objectRef<AuthorizedAppView>("AuthorizedApp").implement({
  description: "An app the user allowed on the consent page, until they withdraw it with revokeOAuthConsent.",
  fields: (t) => ({
    clientId: t.exposeString("clientId", { description: "The app's OAuth client_id (lgc_…), for revokeOAuthConsent." }),
    name: t.exposeString("name", { description: "The app's name, as the consent page showed it." }),
    scopes: t.exposeStringList("scopes", { description: "What it may read: the scopes allowed (openid, email, phone, profile, offline_access)." }),
    allowedAt: t.expose("allowedAt", { type: "DateTime", description: "When the user first allowed it." }),
  }),
});

builder.prismaObjectFields("Account", (t) => ({
  authorizedApps: t.field({
    type: [AuthorizedApp],
    description: `The apps the user allowed on the consent page and has not withdrawn, the latest first (at most ${AUTHORIZED_APPS_LISTED}). Each reads what its scopes name; revokeOAuthConsent withdraws one.`,
    resolve: async (_, __, ctx) => authorizedApps(ctx.deps, await ctx.user()),
  }),
}));

const RevokeOAuthConsentPayload = builder.objectRef<{ clientId: string }>("RevokeOAuthConsentPayload").implement({
  description: "The app's access is withdrawn: the consent page asks again, and what the app held for the user (refresh tokens, sessions) has ended.",
  fields: (t) => ({ clientId: t.exposeString("clientId", { description: "The app's OAuth client_id." }) }),
});

builder.mutationFields((t) => ({
  revokeOAuthConsent: t.field({
    type: RevokeOAuthConsentPayload,
    authScopes: { user: true },
    description: `Withdraws what the signed-in user allowed a third-party app on the consent page, and ends its refresh tokens and sessions for the user. ${NEEDS.recentUser}`,
    args: { clientId: t.arg.string({ required: true, description: "The app's OAuth client_id (lgc_…)." }) },
    errors: { types: [E.NotFound, E.ReauthenticationRequired], union: resultOf("The RevokeOAuthConsentPayload") },
    resolve: async (_, { clientId }, ctx) => revokeConsent(ctx.deps, await ctx.user(), clientId),
  }),
  createOAuthClient: t.field({
    type: OAuthClientSecretPayload,
    authScopes: { secret: true },
    description: `Registers an OpenID Connect client; a CONFIDENTIAL one gets a secret, shown this once. ${NEEDS.secret}`,
    args: { input: t.arg({ type: OAuthClientInput, required: true, description: "Its name, redirect URIs and type." }) },
    errors: { types: [E.InvalidRequest], union: resultOf("The OAuthClientWithSecret") },
    resolve: async (_, { input }, ctx) => createClient(ctx.deps, await ctx.secret(), input),
  }),
  updateOAuthClient: t.field({
    type: UpdateOAuthClientPayload,
    authScopes: { secret: true },
    description: `Changes the settings given of a client; the others stay. ${NEEDS.secret}`,
    args: {
      id: t.arg.id({ required: true, description: "The client's id (oac_…)." }),
      input: t.arg({ type: OAuthClientInput, required: true, description: "The settings to change; `type` cannot change." }),
    },
    errors: { types: [E.NotFound, E.InvalidRequest], union: resultOf("The UpdateOAuthClientPayload") },
    resolve: async (_, { id, input }, ctx) => ({ client: await updateClient(ctx.deps, await ctx.secret(), String(id), input) }),
  }),
  deleteOAuthClient: t.field({
    type: DeleteOAuthClientPayload,
    authScopes: { secret: true },
    description: `Deletes a client with its codes, refresh tokens and remembered consents. ${NEEDS.secret}`,
    args: { id: t.arg.id({ required: true, description: "The client's id (oac_…)." }) },
    errors: { types: [E.NotFound], union: resultOf("The DeleteOAuthClientPayload") },
    resolve: async (_, { id }, ctx) => deleteClient(ctx.deps, await ctx.secret(), String(id)),
  }),
  rotateOAuthClientSecret: t.field({
    type: OAuthClientSecretPayload,
    authScopes: { secret: true },
    description: `Gives a CONFIDENTIAL client a new secret, shown this once; the old one stops working at once. ${NEEDS.secret}`,
    args: { id: t.arg.id({ required: true, description: "The client's id (oac_…)." }) },
    errors: { types: [E.NotFound, E.InvalidRequest], union: resultOf("The OAuthClientWithSecret") },
    resolve: async (_, { id }, ctx) => rotateClientSecret(ctx.deps, await ctx.secret(), String(id)),
  }),
}));
