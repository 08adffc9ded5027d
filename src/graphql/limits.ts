// Validation-time limits on every GraphQL operation (depth, aliases, tokens, directives, cost).
// Placeholder: filled in by the GraphQL-limits work.
import type { Plugin } from "graphql-yoga";
import type { Config } from "../config.ts";

export function limitPlugins(_limits: Config["graphqlLimits"]): Plugin[] {
  return [];
}
