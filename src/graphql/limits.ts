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
// bounds, and asking for the whole schema many times, which MAX_SCHEMA_INTROSPECTIONS bounds;
// their refusals are reported like the others. Tokens, aliases and directives are counted
// in introspection like anywhere else.
//
// Cost: armor's rule multiplies a list's cost by its `first`/`last` when the document spells it
// out. A page size given by a variable, or left out, is invisible to it and would count as one
// row, so `webhooks(first: $n) { … deliveries(first: $m) … }` would look cheap; here the rule
// prices every page size it cannot read at the largest one a field allows, and a field that
// names both `first` and `last` at the larger of the two. With a depth factor
// of 1, the cost is then about the number of values an answer can hold. The price depends on
// the document alone, so yoga may cache it with the validation.
import { blockFieldSuggestionsPlugin } from "@escape.tech/graphql-armor-block-field-suggestions";
import { costLimitRule } from "@escape.tech/graphql-armor-cost-limit";
import { maxAliasesPlugin } from "@escape.tech/graphql-armor-max-aliases";
import { maxDepthPlugin } from "@escape.tech/graphql-armor-max-depth";
import { maxDirectivesPlugin } from "@escape.tech/graphql-armor-max-directives";
import { maxTokensPlugin } from "@escape.tech/graphql-armor-max-tokens";
import { GraphQLError, getNamedType, isInterfaceType, isObjectType, Kind, Lexer, Source, TokenKind, TypeInfo, validate, visit, visitWithTypeInfo, type ArgumentNode, type DocumentNode, type FieldNode, type FragmentDefinitionNode, type GraphQLArgument, type GraphQLSchema, type SelectionSetNode } from "graphql";
import { createGraphQLError, type Plugin } from "graphql-yoga";
import { DEFAULT_WEBHOOKS_PER_PROJECT, type Config } from "../config.ts";
import { CHART_RANGES } from "../delivery/charts.ts";
import { AUTHORIZED_APPS_LISTED } from "../oidc/consents.ts";
import { PASSKEYS_LISTED, SESSIONS_LISTED } from "../support/users.ts";
import { MAX_PAGE } from "./pages.ts";

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

/**
 * How many times an operation may ask for `__schema` (under distinct names; the same name twice
 * is one answer). Depth and cost skip it, so that GraphiQL's introspection query passes, and each
 * answer is the whole schema (about 200 KB with descriptions): 30 aliases of it, a 13 KB document
 * sent without a key, were answered with 6 MB after about 350 ms of the process's only thread
 * (docs/graphql.md, "GraphiQL and introspection"). No client asks for it twice in one operation.
 */
export const MAX_SCHEMA_INTROSPECTIONS = 1;

/**
 * How many fields may stand at one place of the answer: the same field selected again there,
 * directly, in inline fragments or through fragment spreads, with those of a field selected
 * again above it. graphql-js' OverlappingFieldsCanBeMerged compares every pair of them, and
 * their selections again, before anything runs: 490 copies of `viewer { id }`, a 6 KB document
 * within every other limit and sent with no key, took 250 ms of validation on the process's only
 * thread, 330 of `viewer { v { id } }` 550 ms (docs/graphql.md, "Operation limits"). A document
 * that means something selects a field at one place a few times at most.
 */
export const MAX_SAME_PLACE = 30;
/** Fields walked, fragment spreads expanded, before a document counts as too complex: spreads of spreads multiply. */
const MAX_FIELDS_WALKED = 10_000;

type FieldWalk = { most: number; name: string; walkedOut: boolean; introspections: number };

/**
 * One walk of a document's fields, fragments spread, for the limits on them:
 * - the most fields at one place of the answer (a response path: the response names from the
 *   root, through fragments), in any operation or fragment of the document (validation compares
 *   within each), and the field there; or `walkedOut` when the walk went past MAX_FIELDS_WALKED.
 *   Stops as soon as either limit is crossed.
 * - the most response names under which an operation asks for `__schema`: it exists only on
 *   the query root, so only the fields at an operation's root count, its inline fragments and
 *   spreads included (a name collected twice is one).
 */
function walkFields(document: DocumentNode): FieldWalk {
  const fragments = new Map(document.definitions.filter((d) => d.kind === Kind.FRAGMENT_DEFINITION).map((d) => [d.name.value, d]));
  // a place is its parent's number and its response name
  const places = new Map<string, number>();
  const counts: number[] = [];
  let walked = 0;
  const found: FieldWalk = { most: 0, name: "", walkedOut: false, introspections: 0 };
  // the root place of the operation walked and its `__schema` names (none for a fragment)
  let root = -1;
  let schemaNames: Set<string> | undefined;
  const over = () => found.most > MAX_SAME_PLACE || found.walkedOut;
  const walk = (set: SelectionSetNode, parent: number, spreading: Set<string>): void => {
    for (const sel of set.selections) {
      if (over()) return;
      if (sel.kind === Kind.FIELD) {
        if (++walked > MAX_FIELDS_WALKED) found.walkedOut = true;
        const name = sel.alias?.value ?? sel.name.value;
        if (parent === root && sel.name.value === "__schema") schemaNames?.add(name);
        const key = `${parent}:${name}`;
        let place = places.get(key);
        if (place === undefined) places.set(key, (place = counts.push(0) - 1));
        if (++counts[place] > found.most) Object.assign(found, { most: counts[place], name });
        if (sel.selectionSet) walk(sel.selectionSet, place, spreading);
      } else if (sel.kind === Kind.INLINE_FRAGMENT) walk(sel.selectionSet, parent, spreading);
      else {
        // a cycle is refused by validation; here it is walked once
        const fragment = fragments.get(sel.name.value);
        if (!fragment || spreading.has(sel.name.value)) continue;
        spreading.add(sel.name.value);
        walk(fragment.selectionSet, parent, spreading);
        spreading.delete(sel.name.value);
      }
    }
  };
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION && definition.kind !== Kind.FRAGMENT_DEFINITION) continue;
    root = counts.push(0) - 1;
    schemaNames = definition.kind === Kind.OPERATION_DEFINITION ? new Set() : undefined;
    walk(definition.selectionSet, root, new Set(definition.kind === Kind.FRAGMENT_DEFINITION ? [definition.name.value] : []));
    found.introspections = Math.max(found.introspections, schemaNames?.size ?? 0);
    if (over()) break;
  }
  return found;
}

/** The limits on a document's fields, from one walk of them, before graphql-js' rules run. */
const fieldLimits: Plugin = {
  onValidate({ params }) {
    const { most, name, walkedOut, introspections } = walkFields(params.documentAST);
    if (walkedOut) tooComplex(new GraphQLError(`Field limit of ${MAX_FIELDS_WALKED} exceeded, fragments expanded.`));
    if (most > MAX_SAME_PLACE) tooComplex(new GraphQLError(`Limit of ${MAX_SAME_PLACE} fields at one place of the answer exceeded, found ${most} of "${name}".`));
    if (introspections > MAX_SCHEMA_INTROSPECTIONS) tooComplex(new GraphQLError(`Introspection limit of ${MAX_SCHEMA_INTROSPECTIONS} __schema exceeded, found ${introspections}.`));
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

/**
 * Armor's plugin rewrites only validation errors that say `Did you mean "x"?`: a misspelt enum
 * value (`Did you mean the enum value "day"?`) and a variable's misspelt input field, which
 * graphql-js reports while coercing variables, not while validating, still named the schema's
 * values and fields with introspection off. Every answer's errors lose the sentence here.
 */
const SUGGESTION = /\s*Did you mean [^?]*\?/g;
const noSuggestions: Plugin = {
  onResultProcess({ result }) {
    for (const r of Array.isArray(result) ? result : [result]) {
      for (const error of ("errors" in r && r.errors) || []) {
        if (error.message.includes("Did you mean")) (error as { message: string }).message = error.message.replace(SUGGESTION, "");
      }
    }
  },
};

/**
 * How deeply a document may nest brackets (`{`, `[`, `(`) at once, in selections and literals
 * alike. graphql-js parses a nested list or object literal by recursion, a few stack frames per
 * bracket: `{ eventTypes(x: [[[…]]]) }` nested about 2,000 deep, a document the token limit
 * refuses, ran out of stack before its 2,001st token was counted, and was answered 500
 * `INTERNAL_SERVER_ERROR` with an error logged, by anyone without a key. 500 levels parse with
 * room to spare and leave the depth limit to refuse deep selections with its own message; no
 * operation needs more than a few dozen (GraphiQL's introspection nests about 20).
 */
export const MAX_NESTING = 500;

const OPENING: readonly string[] = [TokenKind.BRACE_L, TokenKind.BRACKET_L, TokenKind.PAREN_L];
const CLOSING: readonly string[] = [TokenKind.BRACE_R, TokenKind.BRACKET_R, TokenKind.PAREN_R];

/**
 * Refuses a document nested deeper than MAX_NESTING before the parser sees it, reading its tokens
 * in a loop (the lexer does not recurse). Only the first `maxTokens` are read: past them the
 * token limit refuses the document. A lexing error is left to the parser, which reports it.
 */
function nestingLimit(maxTokens: number): Plugin {
  return {
    onParse({ params }) {
      const source = typeof params.source === "string" ? new Source(params.source) : params.source;
      const lexer = new Lexer(source);
      let depth = 0;
      try {
        for (let n = 0, token = lexer.advance(); token.kind !== TokenKind.EOF && n <= maxTokens; n++, token = lexer.advance()) {
          if (OPENING.includes(token.kind)) depth++;
          else if (CLOSING.includes(token.kind)) depth--;
          if (depth > MAX_NESTING) break;
        }
      } catch (err) {
        if (err instanceof GraphQLError) return;
        throw err;
      }
      if (depth > MAX_NESTING) tooComplex(new GraphQLError(`Nesting limit of ${MAX_NESTING} exceeded.`));
    },
  };
}

const PAGE_ARGS = ["first", "last"];

/**
 * The size a list field is priced at: the largest page size it names, MAX_PAGE for one left to
 * a variable. Left out, the largest default the schema gives its page arguments (a delivery's
 * attempt log shows 6), or MAX_PAGE where none has one (a Relay connection's page size is the
 * server's choice). Armor's rule reads only the first of `first` and `last` it meets,
 * while the connection returns `first ?? last` rows, so `last: 1, first: 100` was priced as one
 * row and fetched a hundred (docs/security.md, "Input, tenants and pages").
 */
function pageSizeOf(args: readonly ArgumentNode[], defs: readonly GraphQLArgument[]): number {
  const given = args.filter((a) => PAGE_ARGS.includes(a.name.value));
  if (given.length === 0) {
    const defaults = defs.map((d) => d.defaultValue).filter((v): v is number => typeof v === "number");
    return defaults.length ? Math.max(...defaults) : MAX_PAGE;
  }
  return Math.max(...given.map((a) => (a.value.kind === Kind.INT ? Number(a.value.value) : MAX_PAGE)));
}

/**
 * Lists without page arguments that can hold many rows, and how many: the price of each row
 * beneath them is multiplied by that, as a page's is by its size. Priced as one row,
 * `event { deliveries { webhook { deliveries(first: 100) { … } } } }` fetched a page of every
 * webhook of the project (20) for the price of one: two such aliases held every database
 * connection for 8 s and other projects' requests got 503 (docs/graphql.md, "Operation limits").
 * `unless`: an argument that narrows the list to one row.
 */
export type ListSizes = Record<string, { rows: number; unless?: string }>;

/**
 * An event's deliveries are priced at no more than the default webhook cap. Priced at a raised
 * cap (the dashboard's tests run with 110), the dashboard's own user lookup (20 recent events
 * with their deliveries) went over the budget and the Users view stopped working; past the
 * default a project that raised its cap is priced as one at the default.
 */
export function listSizes(config: Pick<Config, "webhooksPerProject">): ListSizes {
  return {
    "Event.deliveries": { rows: Math.min(config.webhooksPerProject, DEFAULT_WEBHOOKS_PER_PROJECT), unless: "webhookId" },
    // A chart is its points, 24 or 28, read whatever is selected of it (its totals, or only its
    // `range`, take the same statements): the chart is priced as that many rows, everything
    // selected in it multiplied by that. Priced as one value, 30 aliases of a page of 20
    // webhooks' charts (cost 1,800 with `range` alone) ran 600 charts, two statements each, and
    // 10 aliases of their points (cost 2,200) answered 5,600 (docs/graphql.md, "Operation limits").
    "Query.deliveryChart": { rows: CHART_POINTS },
    "Webhook.deliveryChart": { rows: CHART_POINTS },
    // Lists read whole, up to a bound of their resolvers': priced as one row, 30 aliases of
    // `viewer { authorizedApps { clientId name scopes allowedAt } }` (cost 240) could answer
    // 3,000 apps, and a looked-up account's sessions and passkeys were one row each for up to 50
    // (docs/graphql.md, "Operation limits").
    "Account.authorizedApps": { rows: AUTHORIZED_APPS_LISTED },
    "SupportAccount.sessions": { rows: SESSIONS_LISTED },
    "SupportAccount.passkeys": { rows: PASSKEYS_LISTED },
  };
}

/** The most points a delivery chart has, whatever its range. */
const CHART_POINTS = Math.max(...Object.values(CHART_RANGES).map((r) => r.points));

/**
 * Fields that count or aggregate over a whole list, by the type that has them, and what each
 * costs: `totalCount` counts every delivery of a webhook that matches the filters, up to its whole
 * log. Priced as one value inside its connection (times the connection's page, so `first: 1`
 * made it nearly free), 27 aliases of `webhooks(first: 20) { … deliveries(first: 1) { totalCount } }`
 * (cost 4,860) counted the project's whole delivery log 27 times: 4 s of database time at 200,000
 * deliveries, and four such requests at once 11 s (docs/graphql.md, "Operation limits"). Each
 * one costs AGGREGATE_COST, multiplied by the lists above its connection but not by the
 * connection's own page size (the count does not depend on it). The delivery charts and a
 * webhook's stats are no such fields: they read hourly rollups and a 24-hour window.
 */
export const AGGREGATE_COST = 1000;
const AGGREGATES: Record<string, readonly string[]> = { WebhookDeliveriesConnection: ["totalCount"] };

/**
 * How many aggregate fields (AGGREGATES) a field of this type selects, its fragments' included:
 * each spread counts its fragment's aggregates again, as the connection would count again. Each
 * fragment's own count is worked out once per document and remembered. Walked afresh at every
 * spread, a chain of fragments each spreading the one before twice (`fragment F1 on
 * WebhookDeliveriesConnection { ...F0 ...F0 }`, 22 of them in 2 KB) cost 2^22 walks: 10 s of the
 * process's only thread, from anyone without a key, since limits are checked before credentials
 * (docs/graphql.md, "Operation limits"). A cycle counts nothing more where it closes; validation
 * refuses cyclic fragments anyway.
 */
function aggregateCounter(fragments: Map<string, FragmentDefinitionNode>): (set: SelectionSetNode | undefined, typeName: string) => number {
  const known = new Map<string, number>();
  const open = new Set<string>();
  const count = (set: SelectionSetNode | undefined, names: readonly string[]): number => {
    let n = 0;
    for (const sel of set?.selections ?? []) {
      if (sel.kind === Kind.FIELD) n += names.includes(sel.name.value) ? 1 : 0;
      else if (sel.kind === Kind.INLINE_FRAGMENT) n += count(sel.selectionSet, names);
      else n += spread(sel.name.value, names);
    }
    return n;
  };
  const spread = (name: string, names: readonly string[]): number => {
    const key = `${names.join(" ")}:${name}`;
    const remembered = known.get(key);
    if (remembered !== undefined) return remembered;
    if (open.has(key)) return 0;
    open.add(key);
    const n = count(fragments.get(name)?.selectionSet, names);
    open.delete(key);
    known.set(key, n);
    return n;
  };
  return (set, typeName) => {
    const names = AGGREGATES[typeName];
    return names && set ? count(set, names) : 0;
  };
}

/**
 * A placeholder the cost rule prices at `cost` (an even number): an object costs 2, times its
 * `first`. It stands beside the connection, so only the lists above that multiply it.
 */
const pricedAt = (cost: number): FieldNode => ({
  kind: Kind.FIELD,
  name: { kind: Kind.NAME, value: "aggregate" },
  arguments: [pageArgument(cost / 2)],
  selectionSet: { kind: Kind.SELECTION_SET, selections: [] },
});

const pageArgument = (size: number): ArgumentNode => ({
  kind: Kind.ARGUMENT,
  name: { kind: Kind.NAME, value: "first" },
  value: { kind: Kind.INT, value: String(size) },
});

/**
 * The document as the cost rule prices it: every paged field's page arguments (`first`, `last`)
 * replaced by one `first`, every list of ListSizes given the `first` of its size, and beside each
 * connection that selects aggregates a placeholder priced at theirs (the rule reads only the
 * document, so an argument or a field the schema lacks is no error here).
 */
function pricedPages(schema: GraphQLSchema, document: DocumentNode, lists: ListSizes): DocumentNode {
  const typeInfo = new TypeInfo(schema);
  const narrows = narrowing(document);
  const aggregatesIn = aggregateCounter(new Map(document.definitions.filter((d) => d.kind === Kind.FRAGMENT_DEFINITION).map((d) => [d.name.value, d])));
  return visit(
    document,
    visitWithTypeInfo(typeInfo, {
      SelectionSet: {
        leave(node) {
          const parent = typeInfo.getParentType();
          if (!isObjectType(parent) && !isInterfaceType(parent)) return undefined;
          let aggregates = 0;
          for (const sel of node.selections) {
            const def = sel.kind === Kind.FIELD ? parent.getFields()[sel.name.value] : undefined;
            if (def && sel.kind === Kind.FIELD) aggregates += aggregatesIn(sel.selectionSet, getNamedType(def.type).name);
          }
          return aggregates ? { ...node, selections: [...node.selections, pricedAt(aggregates * AGGREGATE_COST)] } : undefined;
        },
      },
      Field(node) {
        const args = node.arguments ?? [];
        const parent = typeInfo.getParentType();
        const list = parent && lists[`${parent.name}.${node.name.value}`];
        if (list) return list.unless && args.some((a) => a.name.value === list.unless && narrows(a)) ? undefined : { ...node, arguments: [pageArgument(list.rows), ...args] };
        const pageArgs = typeInfo.getFieldDef()?.args.filter((a) => PAGE_ARGS.includes(a.name)) ?? [];
        if (pageArgs.length === 0) return undefined;
        return { ...node, arguments: [pageArgument(pageSizeOf(args, pageArgs)), ...args.filter((a) => !PAGE_ARGS.includes(a.name.value))] };
      },
    }),
  );
}

/**
 * Whether an argument certainly holds a value: a literal other than null, or a variable that every
 * operation of the document declares non-null. A list's `unless` argument narrows it to one row
 * only then: `deliveries(webhookId: null)`, or `$hook: ID` sent as null, returns every webhook's
 * delivery, and priced as one row it fetched a page of each webhook's deliveries for the price of
 * one, 16.7 MB in 3 s (31st review).
 */
function narrowing(document: DocumentNode): (arg: ArgumentNode) => boolean {
  const nullable = new Set<string>();
  const nonNull = new Set<string>();
  for (const def of document.definitions) {
    if (def.kind !== Kind.OPERATION_DEFINITION) continue;
    for (const v of def.variableDefinitions ?? []) (v.type.kind === Kind.NON_NULL_TYPE ? nonNull : nullable).add(v.variable.name.value);
  }
  return (arg) => (arg.value.kind === Kind.VARIABLE ? nonNull.has(arg.value.name.value) && !nullable.has(arg.value.name.value) : arg.value.kind !== Kind.NULL);
}

function costPlugin(maxCost: number, lists: ListSizes): Plugin {
  const rule = costLimitRule({ maxCost, depthCostFactor: 1, flattenFragments: true, ignoreIntrospection: true, ...refuse });
  return {
    onValidate({ params }) {
      validate(params.schema, pricedPages(params.schema, params.documentAST, lists), [rule]);
    },
  };
}

export function limitPlugins(limits: Config["graphqlLimits"], lists: ListSizes): Plugin[] {
  return [
    nestingLimit(limits.maxTokens),
    maxTokensPlugin({ n: limits.maxTokens, ...refuse }),
    maxDepthPlugin({ n: limits.maxDepth, flattenFragments: true, ignoreIntrospection: true, ...refuse }),
    // `__typename` aliases count too (graphql-armor lets them through by default): each costs
    // nothing to resolve, but a document of thousands is work to validate and answer
    maxAliasesPlugin({ n: limits.maxAliases, allowList: [], ...refuse }),
    maxDirectivesPlugin({ n: limits.maxDirectives, ...refuse }),
    fieldLimits,
    costPlugin(limits.maxCost, lists),
    introspectionDepth,
    // Suggestions ("Did you mean …?") would spell out the schema where introspection is off.
    blockFieldSuggestionsPlugin(),
    noSuggestions,
    alwaysBadRequest,
  ] as Plugin[];
}
