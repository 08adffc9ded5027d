// graphql-yoga over the Pothos schema. Domain errors are typed results; credential errors are
// GraphQLErrors with a code; anything else is masked (logged, never shown). Every operation
// passes the input guard and the cost limits before it runs.
import { createYoga } from "graphql-yoga";
import type { Deps } from "../deps.ts";
import { createContext, type ServerContext } from "./context.ts";
import { graphiqlOptions } from "./graphiql.ts";
import { inputGuardPlugin } from "./input-guard.ts";
import { limitPlugins, listSizes } from "./limits.ts";
import { isClientRefusal, maskError } from "./mask.ts";
import { metricsPlugin } from "./metrics-plugin.ts";
import { keepParseCaches, parseCaches } from "./parse-cache.ts";
import { schema } from "./schema/index.ts";

export function createGraphQL(deps: Deps) {
  const graphiql = graphiqlOptions(deps.config);
  return createYoga<ServerContext>({
    schema,
    graphqlEndpoint: "/graphql",
    context: ({ request, clientAddress }) => createContext(deps, request, { clientAddress }),
    graphiql: graphiql.graphiql,
    landingPage: false,
    // yoga's own CORS reflects any Origin with credentials; the app's CORS (src/app.ts) decides
    cors: false,
    // The app bounds every body before it reaches yoga (src/http/body.ts limitBody, 64 KiB).
    // yoga's own bound (25 MB) piped each body through a web TransformStream into a new Request:
    // in a profile of the link benchmark, about a tenth of a trivial request's CPU.
    maxRequestBodySize: false,
    // bounded by what the documents hold, not only their number (src/graphql/parse-cache.ts)
    parserAndValidationCache: keepParseCaches(deps, parseCaches()),
    // metrics first: it reads the operation's name before a limit can refuse it
    plugins: [metricsPlugin(), ...limitPlugins(deps.config.graphqlLimits, listSizes(deps.config)), inputGuardPlugin(), ...graphiql.plugins],
    logging: {
      debug: (...args) => deps.logger.debug(logFields(args), "graphql"),
      info: (...args) => deps.logger.info(logFields(args), "graphql"),
      warn: (...args) => deps.logger.warn(logFields(args), "graphql"),
      // a refusal of the client's own request is no fault of ours (src/graphql/mask.ts)
      error: (...args) => {
        const fields = logFields(args);
        if (fields.err && isClientRefusal(fields.err)) deps.logger.debug({ refused: (fields.err as Error).message }, "graphql request refused");
        else deps.logger.error(fields, "graphql");
      },
    },
    maskedErrors: { maskError },
  });
}

/**
 * yoga logs the error it masks as an argument: under `args`, pino wrote it as `{}` (it serializes
 * an Error only under `err`), so a masked fault left nothing to find it by.
 */
function logFields(args: unknown[]): { err?: unknown; args?: unknown[] } {
  const err = args.find((a) => a instanceof Error);
  const rest = args.filter((a) => a !== err);
  return { ...(err ? { err } : {}), ...(rest.length ? { args: rest } : {}) };
}
