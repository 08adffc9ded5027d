// graphql-yoga over the Pothos schema. Domain errors are typed results; credential errors are
// GraphQLErrors with a code; anything else is masked (logged, never shown).
import { createYoga } from "graphql-yoga";
import type { Deps } from "../deps.ts";
import { createContext } from "./context.ts";
import { schema } from "./schema/index.ts";

export function createGraphQL(deps: Deps) {
  return createYoga({
    schema,
    graphqlEndpoint: "/graphql",
    context: ({ request }) => createContext(deps, request),
    graphiql: { title: "linkgate", headers: JSON.stringify({ "X-API-Key": "<your project API key>" }) },
    landingPage: false,
    logging: {
      debug: (...args) => deps.logger.debug({ args }, "graphql"),
      info: (...args) => deps.logger.info({ args }, "graphql"),
      warn: (...args) => deps.logger.warn({ args }, "graphql"),
      error: (...args) => deps.logger.error({ args }, "graphql"),
    },
    maskedErrors: true,
  });
}
