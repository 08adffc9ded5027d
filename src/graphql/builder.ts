// The Pothos builder: plugins and their options only; types live in schema/<entity>.ts.
// Plugin order matters: scope-auth wraps everything, errors turns domain errors into typed
// results, prisma resolves models with the selections the query asked for.
import SchemaBuilder from "@pothos/core";
import ErrorsPlugin from "@pothos/plugin-errors";
import PrismaPlugin from "@pothos/plugin-prisma";
import RelayPlugin from "@pothos/plugin-relay";
import ScopeAuthPlugin from "@pothos/plugin-scope-auth";
import { createGraphQLError } from "graphql-yoga";
import type PrismaTypes from "../generated/pothos-types.ts";
import { getDatamodel } from "../generated/pothos-types.ts";
import type { GraphQLContext } from "./context.ts";
import { RELAY_DESCRIPTIONS } from "./relay-descriptions.ts";

export const builder = new SchemaBuilder<{
  Context: GraphQLContext;
  PrismaTypes: PrismaTypes;
  AuthScopes: { project: boolean; secret: boolean; user: boolean; admin: boolean };
  Scalars: {
    DateTime: { Input: Date; Output: Date | string };
    EmailAddress: { Input: string; Output: string };
    PhoneNumber: { Input: string; Output: string };
    URL: { Input: URL | string; Output: URL | string };
    JSON: { Input: unknown; Output: unknown };
  };
  DefaultFieldNullability: false;
}>({
  plugins: [ScopeAuthPlugin, ErrorsPlugin, PrismaPlugin, RelayPlugin],
  defaultFieldNullability: false,
  scopeAuth: {
    // A scope loader that throws (bad credentials) surfaces that error as is, so clients get
    // UNAUTHENTICATED or FORBIDDEN rather than a generic refusal.
    authScopes: (ctx) => ({
      project: async () => !!(await ctx.project()),
      secret: async () => !!(await ctx.secret()),
      user: async () => !!(await ctx.user()),
      admin: ctx.admin,
    }),
    unauthorizedError: () => createGraphQLError("these credentials may not do that", { extensions: { code: "FORBIDDEN" } }),
  },
  errors: { directResult: true },
  prisma: {
    client: (ctx) => ctx.deps.prisma,
    dmmf: getDatamodel(),
    filterConnectionTotalCount: true,
    onUnusedQuery: process.env.NODE_ENV === "production" ? null : "warn",
  },
  // No generic node(id) lookup: it would load rows by id alone, outside the project-scoped
  // `where` every other query uses.
  relay: { clientMutationId: "omit", cursorType: "String", nodeQueryOptions: false, nodesQueryOptions: false, ...RELAY_DESCRIPTIONS },
});

