import { createApiKey, createProject, revokeApiKey, type NewProject } from "../../auth/projects.ts";
import type { KeyKind } from "../../deps.ts";
import * as E from "../../errors.ts";
import { builder } from "../builder.ts";
import { resultOf } from "./errors.ts";
import { NEEDS } from "./root.ts";

const Project = builder.prismaObject("Project", {
  description: "A tenant: its users, webhooks and keys are invisible to every other project.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "The project's id: the `project_id` of its events and the audience of its tokens." }),
    name: t.exposeString("name", { description: "Its name, 1 to 200 characters." }),
    createdAt: t.expose("createdAt", { type: "DateTime", description: "When it was created." }),
  }),
});

const ApiKeyKind = builder.enumType("ApiKeyKind", {
  description: "What a project API key may do.",
  values: {
    SECRET: { value: "secret", description: "lg_sk_…: everything, including webhooks, deliveries and events; keep it on servers" },
    PUBLISHABLE: {
      value: "publishable",
      description: "lg_pk_…: only what a signing-in or signed-in user does; safe to ship in web and mobile apps",
    },
  },
});

const NewApiKey = builder.objectRef<{ apiKey: string; apiKeyId: string; projectId: string; kind: KeyKind }>("NewApiKey").implement({
  description: "An API key, shown this once; only its hash is stored.",
  fields: (t) => ({
    apiKey: t.exposeString("apiKey", { description: "The key itself (lg_sk_… or lg_pk_…), for the X-API-Key header: store it now." }),
    apiKeyId: t.exposeID("apiKeyId", { description: "The key's id, to revoke it with." }),
    projectId: t.exposeID("projectId", { description: "The project it belongs to." }),
    kind: t.expose("kind", { type: ApiKeyKind, description: "What it may do." }),
  }),
});

const CreateProjectPayload = builder.objectRef<NewProject>("CreateProjectPayload").implement({
  description: "A new project with one key of each kind, shown this once.",
  fields: (t) => ({
    project: t.field({ type: Project, description: "The project created.", resolve: (p) => p.project as never }),
    secretKey: t.exposeString("secretKey", { description: "lg_sk_…, for servers and the dashboard" }),
    secretKeyId: t.exposeID("secretKeyId", { description: "The secret key's id, to revoke it with." }),
    publishableKey: t.exposeString("publishableKey", { description: "lg_pk_…, for front-end apps" }),
    publishableKeyId: t.exposeID("publishableKeyId", { description: "The publishable key's id, to revoke it with." }),
    apiKey: t.exposeString("secretKey", { description: "The secret key again, under its old name.", deprecationReason: "use secretKey" }),
    apiKeyId: t.exposeID("secretKeyId", { description: "The secret key's id again, under its old name.", deprecationReason: "use secretKeyId" }),
  }),
});

builder.mutationFields((t) => ({
  createProject: t.field({
    type: CreateProjectPayload,
    authScopes: { admin: true },
    description: `Creates a project with one key of each kind. ${NEEDS.admin}`,
    args: { name: t.arg.string({ required: true, description: "Its name, 1 to 200 characters (spaces around it are trimmed)." }) },
    errors: { types: [E.InvalidRequest], union: resultOf("The CreateProjectPayload") },
    resolve: (_, { name }, ctx) => createProject(ctx.deps.prisma, name),
  }),
  createApiKey: t.field({
    type: NewApiKey,
    authScopes: { admin: true },
    description: `Creates another API key for a project, for example to replace one. ${NEEDS.admin}`,
    args: {
      projectId: t.arg.id({ required: true, description: "The project's id." }),
      kind: t.arg({ type: ApiKeyKind, required: true, defaultValue: "secret", description: "What the key may do." }),
    },
    errors: { types: [E.NotFound], union: resultOf("The NewApiKey") },
    resolve: (_, { projectId, kind }, ctx) => createApiKey(ctx.deps.prisma, String(projectId), kind),
  }),
  revokeApiKey: t.boolean({
    authScopes: { admin: true },
    description: `Revokes an API key: from then on it is refused (UNAUTHENTICATED). ${NEEDS.admin}`,
    args: { id: t.arg.id({ required: true, description: "The key's id (apiKeyId, secretKeyId or publishableKeyId)." }) },
    errors: {
      types: [E.NotFound],
      directResult: false,
      union: resultOf("The MutationRevokeApiKeySuccess"),
      result: { description: "The key is revoked." },
      dataField: { description: "Always true." },
    },
    resolve: async (_, { id }, ctx) => {
      await revokeApiKey(ctx.deps.prisma, String(id));
      return true;
    },
  }),
}));
