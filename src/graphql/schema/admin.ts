import { createApiKey, createProject, revokeApiKey, type NewProject } from "../../auth/projects.ts";
import type { KeyKind } from "../../deps.ts";
import * as E from "../../errors.ts";
import { builder } from "../builder.ts";

const Project = builder.prismaObject("Project", {
  description: "A tenant: its users, webhooks and keys are invisible to every other project.",
  fields: (t) => ({
    id: t.exposeID("id"),
    name: t.exposeString("name"),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
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
    apiKey: t.exposeString("apiKey"),
    apiKeyId: t.exposeID("apiKeyId"),
    projectId: t.exposeID("projectId"),
    kind: t.expose("kind", { type: ApiKeyKind }),
  }),
});

const CreateProjectPayload = builder.objectRef<NewProject>("CreateProjectPayload").implement({
  description: "A new project with one key of each kind, shown this once.",
  fields: (t) => ({
    project: t.field({ type: Project, resolve: (p) => p.project as never }),
    secretKey: t.exposeString("secretKey", { description: "lg_sk_…, for servers and the dashboard" }),
    secretKeyId: t.exposeID("secretKeyId"),
    publishableKey: t.exposeString("publishableKey", { description: "lg_pk_…, for front-end apps" }),
    publishableKeyId: t.exposeID("publishableKeyId"),
    apiKey: t.exposeString("secretKey", { deprecationReason: "use secretKey" }),
    apiKeyId: t.exposeID("secretKeyId", { deprecationReason: "use secretKeyId" }),
  }),
});

builder.mutationFields((t) => ({
  createProject: t.field({
    type: CreateProjectPayload,
    authScopes: { admin: true },
    args: { name: t.arg.string({ required: true }) },
    errors: { types: [E.InvalidRequest] },
    resolve: async (_, { name }, ctx) => {
      if (!name.trim() || name.length > 200) throw new E.InvalidRequest("name must be 1 to 200 characters");
      return createProject(ctx.deps.prisma, name.trim());
    },
  }),
  createApiKey: t.field({
    type: NewApiKey,
    authScopes: { admin: true },
    args: {
      projectId: t.arg.id({ required: true }),
      kind: t.arg({ type: ApiKeyKind, required: true, defaultValue: "secret" }),
    },
    errors: { types: [E.NotFound] },
    resolve: (_, { projectId, kind }, ctx) => createApiKey(ctx.deps.prisma, String(projectId), kind),
  }),
  revokeApiKey: t.boolean({
    authScopes: { admin: true },
    args: { id: t.arg.id({ required: true }) },
    errors: { types: [E.NotFound], directResult: false },
    resolve: async (_, { id }, ctx) => {
      await revokeApiKey(ctx.deps.prisma, String(id));
      return true;
    },
  }),
}));
