// What refusing a GraphQL document costs, counted rather than timed (docs/graphql.md, "Operation
// limits"): a count does not change with the machine's load, and it grows with the work a limit
// lets through, where a time bound either flakes or lets a slow refusal by.
import { GraphQLError, Kind, type DocumentNode, type ValidationRule } from "graphql";
import type { Deps } from "../../src/deps.ts";
import { createGraphQL } from "../../src/graphql/yoga.ts";

export type RefusalWork = {
  /** What refused the document (`null` when nothing did), with the stage it came from. */
  refusal: string | null;
  /** `parse`: the parser threw; `limits`: a limit that runs before graphql-js' validation rules; `validation`: those rules ran. */
  stage: "parse" | "limits" | "validation" | "none";
  /**
   * How many times a selection set of the document was read (its `selections`), by every walk
   * over it: the limits' own, the cost rule's and graphql-js' rules'. A walk that spreads
   * fragments out reads a fragment's selections at every spread: a document that holds 2^n
   * fields once spread out, walked in full, reads at least as many.
   */
  selectionSetsRead: number;
};

/**
 * Parses and validates `source` through the server's own GraphQL pipeline (createGraphQL: its
 * plugins, every limit included, and graphql-js' rules) without running it, counting the
 * selection sets read and whether graphql-js' validation rules ran.
 */
export function refusalWork(deps: Deps, source: string): RefusalWork {
  const yoga = createGraphQL(deps);
  const request = new Request("http://linkgate.test/graphql", { method: "POST" });
  const { parse, validate, schema } = yoga.getEnveloped({ request, params: { query: source } });
  let selectionSetsRead = 0;
  let validated = false;
  // handed to validation beside graphql-js' own rules: it is created only when they run
  const validationRan: ValidationRule = () => {
    validated = true;
    return {};
  };
  const refused = (err: unknown, stage: RefusalWork["stage"]): RefusalWork => {
    if (!(err instanceof GraphQLError)) throw err;
    return { refusal: err.message, stage, selectionSetsRead };
  };
  let document: DocumentNode;
  try {
    document = parse(source);
  } catch (err) {
    return refused(err, "parse");
  }
  const counted = countingSelectionReads(document, () => selectionSetsRead++);
  try {
    const errors: readonly GraphQLError[] = validate(schema, counted, [validationRan]);
    return { refusal: errors[0]?.message ?? null, stage: errors.length ? "validation" : "none", selectionSetsRead };
  } catch (err) {
    return refused(err, validated ? "validation" : "limits");
  }
}

/**
 * The document, wrapped so that every read of a selection set's `selections` calls `onRead`.
 * Each node is wrapped once (a walk that keys maps by node finds the same one again), and a
 * node copied by its descriptors (graphql-js' visit, when a visitor edits) copies wrapped
 * children.
 */
function countingSelectionReads<T extends object>(root: T, onRead: () => void): T {
  const wrapped = new WeakMap<object, object>();
  const wrap = (value: unknown): unknown => {
    if (typeof value !== "object" || value === null) return value;
    let proxy = wrapped.get(value);
    if (!proxy) {
      proxy = new Proxy(value, {
        get(target, prop, receiver) {
          if (prop === "selections" && (target as { kind?: unknown }).kind === Kind.SELECTION_SET) onRead();
          return wrap(Reflect.get(target, prop, receiver));
        },
        getOwnPropertyDescriptor(target, prop) {
          const descriptor = Reflect.getOwnPropertyDescriptor(target, prop);
          // a non-configurable property (an array's length) must be reported as it is
          if (!descriptor || !descriptor.configurable || !("value" in descriptor)) return descriptor;
          if (prop === "selections" && (target as { kind?: unknown }).kind === Kind.SELECTION_SET) onRead();
          return { ...descriptor, value: wrap(descriptor.value) };
        },
      });
      wrapped.set(value, proxy);
    }
    return proxy;
  };
  return wrap(root) as T;
}
