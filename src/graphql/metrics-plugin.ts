// Counts GraphQL operations by name and outcome (src/metrics.ts):
// * ok: it ran and answered without a top-level error (a typed domain error such as OTPInvalid
//   is an answer too);
// * refused: turned away before running (unparseable, invalid, over a limit) or for the
//   caller's credentials or input (UNAUTHENTICATED, FORBIDDEN, BAD_USER_INPUT, …);
// * error: it ran and failed (a masked internal error, the database unavailable).
//
// Operation names are chosen by clients, so the label is bounded: a name that is not 1 to 64
// characters of [A-Za-z0-9_] is "other", an operation without one is "anonymous", and only the
// first MAX_OPERATION_NAMES names found in a parsed document get their own series (a name sent
// beside an unparseable document is taken only if already known); later new names are "other".
// A stream of made-up names therefore costs at most that many series, and the names the
// application uses, normally seen first after a start, keep theirs.
import { getOperationAST, type DocumentNode, type ExecutionResult } from "graphql";
import type { Plugin, YogaInitialContext } from "graphql-yoga";
import { metrics, type GraphQLOutcome } from "../metrics.ts";

export const MAX_OPERATION_NAMES = 200;
const NAME = /^[A-Za-z0-9_]{1,64}$/;
const knownNames = new Set<string>();

/** What one request has shown so far: the operation's name (`parsed`: read from its document), and whether it started to run. */
type Seen = { name: string | undefined; parsed: boolean; executed: boolean };

const REFUSAL_CODES = new Set([
  "GRAPHQL_PARSE_FAILED",
  "GRAPHQL_VALIDATION_FAILED",
  "BAD_REQUEST",
  "QUERY_TOO_COMPLEX",
  "BAD_USER_INPUT",
  "UNAUTHENTICATED",
  "FORBIDDEN",
  "RATE_LIMITED",
  "PERSISTED_QUERY_NOT_FOUND",
]);

export function metricsPlugin(): Plugin {
  const requests = new WeakMap<Request, Seen>();
  return {
    onParams({ request, params }) {
      requests.set(request, { name: params.operationName ?? undefined, parsed: false, executed: false });
    },
    // First in the plugin list, this runs before the limits (which throw from their own
    // onValidate): a refused operation is still counted under its name.
    onValidate({ params, context }) {
      const seen = requests.get((context as YogaInitialContext).request);
      if (seen) nameFromDocument(seen, params.documentAST, seen.name);
    },
    onExecute({ args }) {
      const seen = requests.get((args.contextValue as YogaInitialContext).request);
      const operation = getOperationAST(args.document, args.operationName);
      // No such operation in the document: graphql-js refuses it without running anything.
      if (!seen || !operation) return;
      seen.executed = true;
      if (operation.name) Object.assign(seen, { name: operation.name.value, parsed: true });
    },
    onResultProcess({ request, result }) {
      const seen = requests.get(request) ?? { name: undefined, parsed: false, executed: false };
      requests.delete(request);
      for (const r of Array.isArray(result) ? result : [result]) {
        const outcome = outcomeOf(seen, r);
        metrics.graphqlOperations.inc({ operation: operationLabel(seen.name, seen.parsed), outcome });
      }
    },
  };
}

function nameFromDocument(seen: Seen, document: DocumentNode, operationName: string | null | undefined): void {
  const name = getOperationAST(document, operationName)?.name?.value;
  if (name) Object.assign(seen, { name, parsed: true });
}

function outcomeOf(seen: Seen, result: unknown): GraphQLOutcome {
  const errors = (result as ExecutionResult).errors;
  if (!errors?.length) return "ok"; // a stream (no `errors` of its own) counts as started fine
  if (!seen.executed) return "refused";
  return errors.every((e) => REFUSAL_CODES.has(String(e.extensions?.code))) ? "refused" : "error";
}

function operationLabel(name: string | undefined, admit: boolean): string {
  if (!name) return "anonymous";
  if (!NAME.test(name)) return "other";
  if (knownNames.has(name)) return name;
  if (admit && knownNames.size < MAX_OPERATION_NAMES) {
    knownNames.add(name);
    return name;
  }
  return "other";
}
