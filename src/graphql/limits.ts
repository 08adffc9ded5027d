// Validation-time limits on every GraphQL operation (tokens, depth, aliases, directives, cost),
// with graphql-armor's rules. Each armor rule reports its own way (a "Syntax Error" from the
// parser, validation errors with yoga's codes, a 200 under `Accept: application/json`); here
// every refusal becomes the same error before anything runs: HTTP 400 with `extensions.code`
// QUERY_TOO_COMPLEX. Throwing from the rule (rather than reporting) stops the parse or the
// validation at the first limit crossed, so a huge document costs no more than reaching it.
//
// Introspection: depth and cost skip `__schema`, since GraphiQL's own introspection query nests
// deeper than any operation on the schema needs. What makes introspection explode is nesting
// lists of types within types, which graphql-js' MaxIntrospectionDepthRule (a standard rule)
// bounds; its refusal is reported like the others. Tokens, aliases and directives are counted
// in introspection like anywhere else.
import { blockFieldSuggestionsPlugin } from "@escape.tech/graphql-armor-block-field-suggestions";
import { costLimitPlugin } from "@escape.tech/graphql-armor-cost-limit";
import { maxAliasesPlugin } from "@escape.tech/graphql-armor-max-aliases";
import { maxDepthPlugin } from "@escape.tech/graphql-armor-max-depth";
import { maxDirectivesPlugin } from "@escape.tech/graphql-armor-max-directives";
import { maxTokensPlugin } from "@escape.tech/graphql-armor-max-tokens";
import type { GraphQLError } from "graphql";
import { createGraphQLError, type Plugin } from "graphql-yoga";
import type { Config } from "../config.ts";

export const QUERY_TOO_COMPLEX = "QUERY_TOO_COMPLEX";

function tooComplexError(rejection: GraphQLError): GraphQLError {
  return createGraphQLError(rejection.message.replace(/^Syntax Error: /, ""), {
    nodes: rejection.nodes,
    extensions: { code: QUERY_TOO_COMPLEX, http: { status: 400 } },
  });
}

function tooComplex(rejection: GraphQLError): never {
  throw tooComplexError(rejection);
}

/** graphql-js' MaxIntrospectionDepthRule (its message is its only mark). */
const isIntrospectionTooDeep = (error: Error): error is GraphQLError => error.message === "Maximum introspection depth exceeded";

const introspectionDepth: Plugin = {
  onValidate() {
    return ({ result, setResult }) => {
      if (result.some(isIntrospectionTooDeep)) setResult(result.filter(isIntrospectionTooDeep).map(tooComplexError));
    };
  },
};

const refuse = { onReject: [(_: unknown, err: GraphQLError) => tooComplex(err)], propagateOnRejection: true, exposeLimits: true };

/**
 * Yoga marks errors raised while parsing as "spec" errors, which the GraphQL-over-HTTP spec
 * answers with 200 when the client accepts application/json (the dashboard does). A refused
 * operation is a 400 whatever the client accepts.
 */
const alwaysBadRequest: Plugin = {
  onResultProcess({ result }) {
    for (const r of Array.isArray(result) ? result : [result]) {
      for (const error of ("errors" in r && r.errors) || []) {
        if (error.extensions?.code === QUERY_TOO_COMPLEX) (error.extensions as Record<string, unknown>).http = { status: 400 };
      }
    }
  },
};

export function limitPlugins(limits: Config["graphqlLimits"]): Plugin[] {
  return [
    maxTokensPlugin({ n: limits.maxTokens, ...refuse }),
    maxDepthPlugin({ n: limits.maxDepth, flattenFragments: true, ignoreIntrospection: true, ...refuse }),
    maxAliasesPlugin({ n: limits.maxAliases, ...refuse }),
    maxDirectivesPlugin({ n: limits.maxDirectives, ...refuse }),
    costLimitPlugin({ maxCost: limits.maxCost, flattenFragments: true, ignoreIntrospection: true, ...refuse }),
    introspectionDepth,
    // Suggestions ("Did you mean …?") would spell out the schema where introspection is off.
    blockFieldSuggestionsPlugin(),
    alwaysBadRequest,
  ] as Plugin[];
}
