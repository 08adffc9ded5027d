// GraphiQL and introspection, on by default in development and off in production.
// Placeholder: filled in by the GraphiQL work.
import type { Plugin, YogaServerOptions } from "graphql-yoga";
import type { Config } from "../config.ts";

export function graphiqlOptions(config: Config): { graphiql: YogaServerOptions<object, object>["graphiql"]; plugins: Plugin[] } {
  return {
    graphiql: config.graphiql ? { title: "linkgate", headers: JSON.stringify({ "X-API-Key": "<your project API key>" }) } : false,
    plugins: [],
  };
}
