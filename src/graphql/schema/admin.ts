import { createApiKey, createProject, revokeApiKey } from "../../auth/projects.ts";
import * as E from "../../errors.ts";
import { builder } from "../builder.ts";

const Project = builder.prismaObject("Project", {
  fields: (t) => ({
    id: t.exposeID("id"),
    name: t.exposeString("name"),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

const NewApiKey = builder.objectRef<{ apiKey: string; apiKeyId: string; projectId: string }>("NewApiKey").implement({
  description: "An API key, shown this once; only its hash is stored.",
  fields: (t) => ({
    apiKey: t.exposeString("apiKey"),
    apiKeyId: t.exposeID("apiKeyId"),
    projectId: t.exposeID("projectId"),
  }),
});

const CreateProjectPayload = builder
  .objectRef<{ project: { id: string; name: string; createdAt: Date }; apiKey: string; apiKeyId: string }>("CreateProjectPayload")
  .implement({
    fields: (t) => ({
      project: t.field({ type: Project, resolve: (p) => p.project as never }),
      apiKey: t.exposeString("apiKey"),
      apiKeyId: t.exposeID("apiKeyId"),
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
    args: { projectId: t.arg.id({ required: true }) },
    errors: { types: [E.NotFound] },
    resolve: (_, { projectId }, ctx) => createApiKey(ctx.deps.prisma, String(projectId)),
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
