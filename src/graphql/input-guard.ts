// Refuses GraphQL inputs that no field can take (NUL bytes, lone surrogates) before execution.
// Postgres text cannot hold NUL (22021) and UTF-8 cannot carry an unpaired surrogate; caught
// here, such input is one clear BAD_USER_INPUT for every field, new ones included, instead of
// a masked internal error from whichever query first meets it.
import { BREAK, Kind, visit, type DocumentNode } from "graphql";
import { createGraphQLError, type Plugin } from "graphql-yoga";
import { isStorableText, unstorableTextPath } from "../text.ts";

const REASON = "contains a NUL character or an unpaired surrogate";

export function inputGuardPlugin(): Plugin {
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const where = unstorableInput(args.document, args.variableValues);
      if (where) setResultAndStopExecution({ errors: [badUserInput(`${where} ${REASON}`)] });
    },
  };
}

/** Where the first unstorable string of an operation is, or undefined when there is none. */
export function unstorableInput(document: DocumentNode, variables: unknown): string | undefined {
  const literal = unstorableLiteral(document);
  if (literal) return literal;
  if (variables == null) return undefined;
  const path = unstorableTextPath(variables);
  return path === undefined ? undefined : `variable $${path || "variables"}`;
}

// Every string literal of the document: argument values, list and object fields, and the
// default values of variables.
function unstorableLiteral(document: DocumentNode): string | undefined {
  let found: string | undefined;
  visit(document, {
    [Kind.STRING]: {
      enter(node) {
        if (isStorableText(node.value)) return undefined;
        found = node.loc ? `the string at line ${node.loc.startToken.line}, column ${node.loc.startToken.column}` : "a string literal";
        return BREAK;
      },
    },
  });
  return found;
}

function badUserInput(message: string) {
  return createGraphQLError(message, { extensions: { code: "BAD_USER_INPUT", http: { status: 400 } } });
}
