// Property-based fuzzing of the whole public surface: every REST route, and every argument of
// every GraphQL field, found by walking the schema (a new field or argument is fuzzed without
// touching this file). Generated values: strings with NUL, unpaired surrogates, 1 MB values,
// unicode of every plane, dates at the edges of the calendar, junk cursors and ids; numbers at
// and past every range; deep nesting; wrong types. For every request:
//   - no 5xx, and no GraphQL error with code INTERNAL_SERVER_ERROR;
//   - a rejected request (REST 4xx; GraphQL refused at the top level or answered with a typed
//     error; any query) leaves the database exactly as it was. Rate-limit counters and a
//     session's last use are not compared (test/support/db-snapshot.ts), and a 429 may record
//     a security event: a counted refusal is still a refusal.
// Most calls are well-formed but for one spoiled place, so the hostile value gets past the
// other arguments' checks and down to the database.
import fc from "fast-check";
import {
  getNamedType,
  isAbstractType,
  isEnumType,
  isInputObjectType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  isScalarType,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLNamedType,
  type GraphQLObjectType,
  type GraphQLSchema,
} from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { schema } from "../src/graphql/schema/index.ts";
import { EVENT_TYPES } from "../src/webhooks/event-types.ts";
import { backends } from "./support/db.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { dbSnapshot, type DbSnapshot } from "./support/db-snapshot.ts";

const REST_RUNS = 300;
const RUNS_PER_GRAPHQL_TARGET = { mutation: 30, query: 60 };

// ---------------------------------------------------------------------------------------------
// Values

const b64 = (s: string) => Buffer.from(s, "utf8").toString("base64");
const b64url = (s: string) => Buffer.from(s, "utf8").toString("base64url");

const MEGABYTE = "x".repeat(1 << 20);

const CALENDAR_EDGES = [
  "0000-01-01T00:00:00Z",
  "0000-01-01",
  "0001-01-01T00:00:00Z",
  "-000001-01-01T00:00:00Z",
  "9999-12-31T23:59:59.999Z",
  "9999-12-31",
  "+275760-09-13T00:00:00.000Z",
  "+275760-09-13T00:00:00.001Z",
  "-271821-04-20T00:00:00.000Z",
  "-271821-04-19T23:59:59.999Z",
  "+294277-01-01T00:00:00Z",
  "-004714-11-24T00:00:00Z",
  "1970-01-01T00:00:00Z",
  "2024-02-29T12:00:00Z",
  "2023-02-29T12:00:00Z",
  "2024-13-01T00:00:00Z",
  "2024-01-01T24:00:00Z",
  "2016-12-31T23:59:60Z",
  "2024-01-01T00:00:00+14:00",
  "2024-01-01T00:00:00-12:00",
  "2024-01-01T00:00:00+99:99",
  "2024-01-01T00:00:00.123456789Z",
  "2024-01-01 00:00:00",
  "now",
  "Infinity",
  "NaN",
  "8640000000000000",
  "-8640000000000001",
];

const JUNK_CURSORS = [
  "!!!",
  "=",
  "====",
  "a",
  "\u{1F600}",
  b64url("v1:"),
  b64url("v1:-1"),
  b64url("v1:99999999999999999999"),
  b64url("v1:9223372036854775807"),
  b64url("v1:9223372036854775808"),
  b64url("v1:1e3"),
  b64url("v2:1"),
  b64("GPC:S:x"),
  b64("GPC:S:"),
  b64("GPC:N:1e400"),
  b64("GPC:N:NaN"),
  b64("GPC:J:{"),
  b64("GPC:J:{\"id\":{\"gt\":\"\"}}"),
  b64("GPC:D:99999999999999999"),
  b64("GPC:D:-8640000000000001"),
  b64("GPC:S:" + "\u0000"),
  b64("x".repeat(3000)),
];

const IDENTIFIERS = [
  "fuzz-owner@example.com",
  "FUZZ-OWNER@EXAMPLE.COM",
  "someone@example.com",
  "a@b",
  "@example.com",
  "a@@example.com",
  "a@example.com\r\nBcc: victim@example.com",
  "\u00e9l\u00e8ve@exemple.fr",
  "user@xn--80ak6aa92e.com",
  "+12025550143",
  "+1202555014",
  "+999999999999999999",
  "+0",
  "2025550143",
  "+1 (202) 555-0143",
  "+١٢٠٢٥٥٥٠١٤٣",
];

const URLS = ["http://127.0.0.1:9/hook", "https://example.com/hook", "http://[::1]/x", "ftp://example.com", "javascript:alert(1)", "http://", "http://a b", "//x"];

const ODD = [
  "",
  " ",
  "\u0000",
  "a\u0000b",
  "\ud800",
  "\udfff",
  "x\ud83d",
  "\ude00x",
  "\u200b",
  "\u202e",
  "\ufeff",
  "e\u0301",
  "\u{10ffff}",
  "' OR 1=1 --",
  "%",
  "_",
  "\\",
  "null",
  "undefined",
  "__proto__",
  "constructor",
  "user.created",
  "*",
  "pending",
  "SECRET",
];

/** Every UTF-16 code unit, unpaired surrogates included. */
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c));

const sixDigits = fc.integer({ min: 0, max: 999_999 }).map((n) => String(n).padStart(6, "0"));
const emails = fc.oneof(fc.constantFrom("fuzz-owner@example.com", "someone@example.com"), fc.emailAddress());
const phones = fc.oneof(fc.constantFrom("+12025550143", "+447700900123"), fc.integer({ min: 2_000_000_000, max: 9_999_999_999 }).map((n) => `+1${n}`));
const validDates = fc.date({ min: new Date("1970-01-01T00:00:00Z"), max: new Date("2100-01-01T00:00:00Z"), noInvalidDate: true }).map((d) => d.toISOString());

/** Where the fixtures' ids are, and whether a call may name them exactly. */
type Ids = { known: () => string[]; exact: boolean };

const anyKnown = (ids: Ids) => fc.constant(null).chain(() => fc.constantFrom(...ids.known()));

/** A known id made almost right (and still storable): the bugs hide next to real values. */
const nearMiss = (id: string) => fc.constantFrom(id.toUpperCase(), id.slice(0, -1), `${id}x`, `${id} `, `${id}%`, `${id}'`, id.replace(/_/, "-"));

/**
 * A well-formed string for an argument or body field, judged by its name (a six-digit code for
 * an otp, an address for an email, a fixture's id for an id...). Ids are exact only where the
 * call cannot destroy a fixture (queries); elsewhere they are near misses.
 */
function plausibleFor(name: string, ids: Ids): fc.Arbitrary<string> {
  if (/^(after|before)$/.test(name)) {
    const pageOf = anyKnown(ids).map((id) => b64(`GPC:S:${id}`));
    return fc.oneof({ weight: 1, arbitrary: pageOf }, { weight: 2, arbitrary: fc.constantFrom(b64url("v1:1"), b64url("v1:0"), ...JUNK_CURSORS) });
  }
  if (/otp|code/i.test(name)) return sixDigits;
  if (/email/i.test(name)) return emails;
  if (/phone/i.test(name)) return phones;
  if (/url/i.test(name)) return fc.constantFrom("http://127.0.0.1:9/hook", "https://example.com/hook");
  if (/event/i.test(name)) return fc.constantFrom(...EVENT_TYPES);
  if (/since|until|date|time/i.test(name)) return validDates;
  if (/(^|_)id$|Id$/.test(name)) {
    const misses = anyKnown(ids).chain(nearMiss);
    return ids.exact ? fc.oneof(anyKnown(ids), misses) : misses;
  }
  return fc.oneof(fc.constantFrom("Ada Lovelace", "fuzz fixture", "acme"), fc.string({ minLength: 1, maxLength: 20 }));
}

function junkString(ids: Ids): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.string({ maxLength: 40 }) },
    { weight: 2, arbitrary: fc.string({ unit: codeUnit, maxLength: 20 }) },
    { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 20 }) },
    { weight: 3, arbitrary: fc.constantFrom(...ODD) },
    { weight: 2, arbitrary: fc.constantFrom(...CALENDAR_EDGES) },
    { weight: 1, arbitrary: fc.date({ noInvalidDate: true }).map((d) => d.toISOString()) },
    { weight: 2, arbitrary: fc.constantFrom(...JUNK_CURSORS) },
    { weight: 2, arbitrary: fc.constantFrom(...IDENTIFIERS) },
    { weight: 1, arbitrary: fc.constantFrom(...URLS) },
    { weight: 2, arbitrary: anyKnown(ids).chain(nearMiss) },
    { weight: 1, arbitrary: fc.constantFrom(MEGABYTE, "y".repeat(70_000), "z".repeat(10_000)) },
  );
}

const numbers = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.constantFrom(0, -1, 2 ** 31 - 1, 2 ** 31, -(2 ** 31) - 1, 2 ** 53, 2 ** 53 + 2, 1e308, -1e308, 5e-324, -0, 0.5, 1000, 10_001),
);

function deep(depth: number): unknown {
  let v: unknown = "bottom";
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { a: v };
  return v;
}

function anyJson(ids: Ids): fc.Arbitrary<unknown> {
  const leaf = fc.oneof({ weight: 6, arbitrary: junkString(ids) }, numbers, fc.boolean(), fc.constant(null));
  const nested = fc.oneof(
    { weight: 3, arbitrary: fc.array(leaf, { maxLength: 3 }) },
    { weight: 3, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), leaf, { maxKeys: 3 }) },
    { weight: 1, arbitrary: fc.integer({ min: 50, max: 2000 }).map(deep) },
  );
  return fc.oneof({ weight: 6, arbitrary: leaf }, { weight: 1, arbitrary: nested });
}

// ---------------------------------------------------------------------------------------------
// One hostile change in an otherwise well-formed call: the other arguments being valid is what
// carries the hostile one past the first check and down to the database.

type Spoiler =
  | { kind: "insert"; char: string; at: number }
  | { kind: "replace"; value: unknown }
  | { kind: "drop" };

function spoiler(ids: Ids): fc.Arbitrary<Spoiler> {
  return fc.oneof(
    { weight: 5, arbitrary: fc.record({ kind: fc.constant("insert" as const), char: fc.constantFrom("\u0000", "\u0000", "\u0000", "\ud800", "\udfff"), at: fc.nat() }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant("replace" as const), value: anyJson(ids) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("drop" as const) }) },
  );
}

/** The value with the `pick`-th leaf (string, number, boolean, null, empty list or object) spoiled. */
function spoil<T>(value: T, pick: number, how: Spoiler): T {
  const copy = structuredClone(value);
  const leaves: Array<[Record<string | number, unknown>, string | number]> = [];
  const walk = (node: unknown) => {
    if (node === null || typeof node !== "object") return;
    for (const [k, v] of Object.entries(node)) {
      const key = Array.isArray(node) ? Number(k) : k;
      const inner = v !== null && typeof v === "object" && Object.keys(v).length > 0;
      if (inner) walk(v);
      else leaves.push([node as Record<string | number, unknown>, key]);
    }
  };
  walk(copy);
  if (!leaves.length) return copy;
  const [parent, key] = leaves[pick % leaves.length];
  const current = parent[key];
  if (how.kind === "drop") {
    if (Array.isArray(parent)) parent.splice(key as number, 1);
    else delete parent[key];
  } else if (how.kind === "insert") {
    const s = typeof current === "string" ? current : String(current);
    const at = how.at % (s.length + 1);
    parent[key] = s.slice(0, at) + how.char + s.slice(at);
  } else {
    parent[key] = how.value;
  }
  return copy;
}

/** Calls: mostly well-formed with one spoiled place, some wholly hostile, some wholly valid. */
function callsFrom<T>(good: fc.Arbitrary<T>, hostile: fc.Arbitrary<T>, ids: Ids): fc.Arbitrary<T> {
  const spoiled = fc.tuple(good, fc.nat(), spoiler(ids)).map(([v, pick, how]) => spoil(v, pick, how));
  return fc.oneof({ weight: 6, arbitrary: spoiled }, { weight: 2, arbitrary: hostile }, { weight: 1, arbitrary: good });
}

// ---------------------------------------------------------------------------------------------
// GraphQL: what to fuzz, found in the schema

type Step = { field: GraphQLField<unknown, unknown>; on?: GraphQLObjectType };
type Target = { operation: "query" | "mutation"; coordinate: string; path: Step[] };

/** Every field that takes arguments, each with the shortest path from a root type to it. */
function graphqlTargets(s: GraphQLSchema): Target[] {
  const targets = new Map<string, Target>();
  for (const [operation, root] of [
    ["query", s.getQueryType()],
    ["mutation", s.getMutationType()],
  ] as const) {
    if (!root) continue;
    const visited = new Set<string>([root.name]);
    const queue: Array<{ type: GraphQLObjectType; path: Step[] }> = [{ type: root, path: [] }];
    while (queue.length) {
      const { type, path } = queue.shift()!;
      for (const field of Object.values(type.getFields())) {
        const coordinate = `${type.name}.${field.name}`;
        const here = [...path, { field }];
        if (field.args.length && !targets.has(coordinate)) targets.set(coordinate, { operation, coordinate, path: here });
        const named = getNamedType(field.type);
        const objects = isObjectType(named) ? [named] : isAbstractType(named) ? s.getPossibleTypes(named) : [];
        for (const next of objects) {
          if (visited.has(next.name)) continue;
          visited.add(next.name);
          queue.push({ type: next, path: isAbstractType(named) ? [...path, { field, on: next }] : here });
        }
      }
    }
  }
  return [...targets.values()];
}

const variableName = (step: number, arg: GraphQLArgument) => `s${step}_${arg.name}`;

/**
 * What to read of a result, so that resolving it really runs (a connection with only
 * __typename selected never queries its rows): every field without arguments, objects down to
 * `depth` levels, every member of a union.
 */
function selectionOf(type: GraphQLNamedType, depth: number): string {
  if (isLeafType(type)) return "";
  if (isAbstractType(type)) {
    const members = schema.getPossibleTypes(type).map((t) => `... on ${t.name} ${selectionOf(t, depth)}`);
    return `{ __typename ${members.join(" ")} }`;
  }
  if (!isObjectType(type)) return "{ __typename }";
  const fields = Object.values(type.getFields())
    .filter((f) => f.args.length === 0)
    .map((f) => {
      const named = getNamedType(f.type);
      if (isLeafType(named)) return f.name;
      return depth > 0 ? `${f.name} ${selectionOf(named, depth - 1)}` : "";
    })
    .filter(Boolean);
  return `{ __typename ${fields.join(" ")} }`;
}

/**
 * The document for a path: every argument a variable; the target reads its result (see
 * selectionOf). `upTo` cuts the path short, to probe whether its parents resolve.
 */
function documentFor(target: Target, upTo = target.path.length): string {
  const path = target.path.slice(0, upTo);
  const defs: string[] = [];
  let selection = "";
  for (let i = path.length - 1; i >= 0; i--) {
    const { field, on } = path[i];
    const args = field.args.map((arg) => {
      defs.push(`$${variableName(i, arg)}: ${String(arg.type)}`);
      return `${arg.name}: $${variableName(i, arg)}`;
    });
    const call = `${field.name}${args.length ? `(${args.join(", ")})` : ""}`;
    const last = i === path.length - 1;
    const inner = last ? (upTo === target.path.length ? selectionOf(getNamedType(field.type), 2) : "{ __typename }") : `{ __typename ${selection} }`;
    selection = on && !last ? `${call} { ... on ${on.name} ${inner} }` : `${call} ${inner}`;
  }
  return `${target.operation}${defs.length ? `(${defs.reverse().join(", ")})` : ""} { ${selection} }`;
}

/** A well-formed value of an input type (by its name where the type says little). */
function goodValue(type: GraphQLInputType, name: string, ids: Ids): fc.Arbitrary<unknown> {
  if (isNonNullType(type)) return goodValue(type.ofType, name, ids);
  if (isListType(type)) return fc.array(goodValue(type.ofType, name, ids), { minLength: 1, maxLength: 3 });
  if (isEnumType(type)) return fc.constantFrom(...type.getValues().map((v) => v.name));
  if (isInputObjectType(type)) {
    const fields = Object.values(type.getFields());
    return fc.record(Object.fromEntries(fields.map((f) => [f.name, goodValue(f.type, f.name, ids)])), {
      requiredKeys: fields.filter((f) => isNonNullType(f.type)).map((f) => f.name),
    });
  }
  switch (isScalarType(type) ? type.name : "") {
    case "Int":
    case "Float":
      return fc.integer({ min: 1, max: 50 });
    case "Boolean":
      return fc.boolean();
    case "JSON":
      return fc.jsonValue({ maxDepth: 2 });
    case "DateTime":
      return validDates;
    case "EmailAddress":
      return emails;
    case "PhoneNumber":
      return phones;
    case "ID":
      return plausibleFor(/id$/i.test(name) ? name : `${name}Id`, ids);
    default:
      return plausibleFor(name, ids);
  }
}

/** Anything at all for an input type: the right shape with hostile contents, or the wrong shape. */
function anyValue(type: GraphQLInputType, name: string, ids: Ids): fc.Arbitrary<unknown> {
  const right = ((): fc.Arbitrary<unknown> => {
    if (isNonNullType(type)) return anyValue(type.ofType, name, ids);
    if (isListType(type)) return fc.oneof(fc.array(anyValue(type.ofType, name, ids), { maxLength: 4 }), anyValue(type.ofType, name, ids));
    if (isEnumType(type)) return fc.oneof(fc.constantFrom(...type.getValues().map((v) => v.name)), junkString(ids));
    if (isInputObjectType(type)) {
      const fields = Object.values(type.getFields());
      return fc.record(Object.fromEntries(fields.map((f) => [f.name, anyValue(f.type, f.name, ids)])), { requiredKeys: [] });
    }
    if (isScalarType(type) && ["Int", "Float"].includes(type.name)) return numbers;
    if (isScalarType(type) && type.name === "DateTime") return fc.oneof(fc.constantFrom(...CALENDAR_EDGES), numbers);
    return junkString(ids);
  })();
  return fc.oneof({ weight: 6, arbitrary: right }, { weight: 1, arbitrary: anyJson(ids) }, { weight: 1, arbitrary: fc.constant(null) });
}

/**
 * Variables for some arguments: the required ones always, each optional one in about a third
 * of the calls, as clients send them (several optional page arguments at once mostly meet a
 * "not both" check first).
 */
function argsRecord(args: readonly GraphQLArgument[], step: number, value: (arg: GraphQLArgument) => fc.Arbitrary<unknown>) {
  const entries = args.map((arg) => {
    const v = value(arg);
    return [variableName(step, arg), isNonNullType(arg.type) ? v : fc.oneof({ weight: 2, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: v })] as const;
  });
  return fc
    .record(Object.fromEntries(entries))
    .map((r) => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined))) as fc.Arbitrary<Record<string, unknown>>;
}

/** Variables for the target field's own arguments. */
function targetVariables(target: Target, ids: Ids): fc.Arbitrary<Record<string, unknown>> {
  const step = target.path.length - 1;
  const { args } = target.path[step].field;
  return callsFrom(
    argsRecord(args, step, (a) => goodValue(a.type, a.name, ids)),
    argsRecord(args, step, (a) => anyValue(a.type, a.name, ids)),
    ids,
  );
}

// ---------------------------------------------------------------------------------------------
// REST

const REST_ROUTES: Array<{ method: "GET" | "POST"; path: string; fields: string[] }> = [
  { method: "POST", path: "/auth/otp/start", fields: ["email", "phone"] },
  { method: "POST", path: "/auth/otp/verify", fields: ["state_id", "otp"] },
  { method: "POST", path: "/users/link/request", fields: ["email", "phone"] },
  { method: "POST", path: "/users/link/verify", fields: ["state_id", "otp"] },
  { method: "POST", path: "/users/link/remove", fields: ["email", "phone"] },
  { method: "POST", path: "/users/link/unmerge", fields: [] },
  { method: "POST", path: "/api/v1/webhooks/rotate-secret", fields: ["webhook_id"] },
  { method: "GET", path: "/oauth/userinfo", fields: [] },
  { method: "POST", path: "/oauth/userinfo", fields: [] },
];

// ---------------------------------------------------------------------------------------------

const TARGETS = graphqlTargets(schema);

const ERROR_TYPES = new Set(
  Object.values(schema.getTypeMap())
    .filter((t) => isObjectType(t) && t.getInterfaces().some((i) => i.name === "Error"))
    .map((t) => t.name),
);

/** A mutation refused at the top level, or answered with one of its typed errors. */
function mutationOutcome(body: any, field: string): { rejected: boolean; counted: boolean } {
  const result = body?.data?.[field];
  if (result === undefined || result === null) return { rejected: true, counted: false };
  const typename = typeof result === "object" ? result.__typename : undefined;
  return { rejected: ERROR_TYPES.has(typename), counted: typename === "RateLimited" };
}


const describeRequest = (r: unknown) => JSON.stringify(r, (_k, v) => (typeof v === "string" && v.length > 200 ? `${v.slice(0, 200)}…(${v.length})` : v));

describe.each(backends)("fuzzing every REST route and GraphQL argument on %s", (backend) => {
  let h: Harness;
  let token: string;
  let snapshot: DbSnapshot;
  const knownIds: string[] = [];
  const queryIds: Ids = { known: () => knownIds, exact: true };
  const writeIds: Ids = { known: () => knownIds, exact: false };

  beforeAll(async () => {
    h = await startHarness(backend, {
      env: {
        // The fuzz should reach the code behind the limits, not stop at them.
        LINKGATE_LIMIT_SENDS_PER_IDENTIFIER_ADDRESS: "100000",
        LINKGATE_LIMIT_SENDS_PER_ADDRESS_HOURLY: "100000",
        LINKGATE_LIMIT_WRONG_CODES_PER_IDENTIFIER_ADDRESS: "100000",
      },
    });
    const signedIn = await h.signIn({ email: "fuzz-owner@example.com" });
    token = signedIn.token;
    const created = await h.gql(
      `mutation($input: WebhookInput!) { createWebhook(input: $input) { __typename ... on CreateWebhookPayload { webhook { id } } } }`,
      { input: { url: "http://127.0.0.1:9/hook", events: ["user.created"], description: "fuzz fixture" } },
    );
    const webhookId = created.body.data.createWebhook.webhook.id;
    await h.gql(`mutation($id: ID!) { sendTestWebhook(webhookId: $id, eventType: "user.created") { __typename } }`, { id: webhookId });
    const p = h.db.prisma;
    const rows = await Promise.all([
      p.delivery.findMany({ select: { id: true } }),
      p.outboxEvent.findMany({ select: { id: true } }),
      p.apiKey.findMany({ select: { id: true } }),
      p.session.findMany({ select: { id: true } }),
      p.identifier.findMany({ select: { id: true } }),
      p.otpState.findMany({ select: { id: true } }),
    ]);
    knownIds.push(webhookId, signedIn.accountId, h.projectId, ...rows.flat().map((r) => r.id));
    snapshot = await dbSnapshot(h.db);
  });
  afterAll(() => h?.close());

  type Creds = { key: "secret" | "publishable" | "none" | "junk"; user: "token" | "none" | "junk"; admin: boolean };
  // Mostly the credentials a field needs, so the values reach the code behind the checks.
  const creds = fc.record<Creds>({
    key: fc.constantFrom("secret", "secret", "secret", "secret", "secret", "secret", "publishable", "publishable", "none", "junk"),
    user: fc.constantFrom("token", "token", "token", "token", "none", "junk"),
    admin: fc.boolean(),
  });

  function headersFor(c: Creds): Record<string, string> {
    const key = { secret: h.apiKey, publishable: h.publishableKey, none: "", junk: "lg_sk_not_a_key_at_all_really" }[c.key];
    const headers: Record<string, string> = { "x-api-key": key };
    if (c.user === "token") headers.authorization = `Bearer ${token}`;
    if (c.user === "junk") headers.authorization = "Bearer eyJhbGciOiJub25lIn0.e30.";
    if (c.admin) headers["x-admin-token"] = h.adminToken;
    return headers;
  }

  /** Compares the database with the last snapshot when the request was rejected; moves on otherwise. */
  async function expectUnchangedIf(rejected: boolean, what: string) {
    const before = snapshot;
    snapshot = await dbSnapshot(h.db);
    if (!rejected) return;
    const changed = Object.keys(before).filter((t) => before[t].hash !== snapshot[t]?.hash);
    expect(changed, `a rejected request changed these tables: ${what}`).toEqual([]);
  }

  it(`REST: ${REST_RUNS} generated requests over ${REST_ROUTES.length} routes, none a 5xx, no rejected one changes anything`, async () => {
    const fields = (names: string[], value: (name: string) => fc.Arbitrary<unknown>) =>
      fc.record(Object.fromEntries(names.map((f) => [f, value(f)])), { requiredKeys: [] }) as fc.Arbitrary<Record<string, unknown>>;
    const hostileBody = (names: string[]) =>
      fc.oneof(
        fields(names, () => anyJson(writeIds)),
        fc.dictionary(fc.string({ unit: codeUnit, maxLength: 6 }), anyJson(writeIds), { maxKeys: 2 }),
        anyJson(writeIds),
      );
    const body = (names: string[]) =>
      fc.oneof(
        { weight: 8, arbitrary: callsFrom(fields(names, (f) => plausibleFor(f, writeIds)), hostileBody(names), writeIds).map((v) => JSON.stringify(v) ?? "") },
        {
          weight: 1,
          arbitrary: fc.constantFrom("", "{", "[]", "null", "\u0000", `{"email":"a\\ud800@example.com"}`, "[".repeat(30_000) + "]".repeat(30_000), `{"otp":${"[".repeat(5000)}${"]".repeat(5000)}}`),
        },
      );
    const request = fc.constantFrom(...REST_ROUTES).chain((route) =>
      fc.record({
        route: fc.constant(route),
        raw: body(route.fields),
        type: fc.oneof({ weight: 8, arbitrary: fc.constantFrom("application/json", "application/json; charset=utf-8") }, { weight: 1, arbitrary: fc.constantFrom("text/plain", "") }),
        creds,
        bearerKey: fc.boolean(),
      }),
    );
    await fc.assert(
      fc.asyncProperty(request, async ({ route, raw, type, creds: c, bearerKey }) => {
        const headers = headersFor(c);
        // rotate-secret takes the project key as a bearer token
        if (route.path.includes("rotate-secret") && bearerKey) headers.authorization = `Bearer ${headers["x-api-key"]}`;
        if (type) headers["content-type"] = type;
        const r = await h.call(route.method, route.path, route.method === "GET" ? { headers } : { raw, headers });
        const what = describeRequest({ route: route.path, raw, headers, status: r.status, body: r.body });
        expect(r.status, what).toBeLessThan(500);
        if (r.status >= 400) expect(r.body, what).toEqual({ error: expect.any(String), message: expect.any(String) });
        await expectUnchangedIf(r.status >= 400 && r.status !== 429, what);
      }),
      { numRuns: REST_RUNS },
    );
  });

  it("GraphQL: the schema walk finds the fields that take arguments, nested ones included", () => {
    const coordinates = TARGETS.map((t) => t.coordinate);
    expect(coordinates).toEqual(expect.arrayContaining(["Query.webhook", "Mutation.createWebhook", "Mutation.verifyLink", "Webhook.deliveries"]));
  });

  /**
   * Arguments for the fields above the target (webhook(id) above deliveries) that make them
   * resolve to a row, so the target's own arguments are really used: each fixture id is tried.
   */
  async function reachingParentArgs(target: Target): Promise<Record<string, unknown> | undefined> {
    const parents = target.path.slice(0, -1);
    if (!parents.some((s) => s.field.args.length)) return {};
    const probe = documentFor(target, parents.length);
    for (const id of knownIds) {
      const variables: Record<string, unknown> = {};
      parents.forEach((s, i) => s.field.args.filter((a) => isNonNullType(a.type)).forEach((a) => (variables[variableName(i, a)] = id)));
      const r = await h.gql(probe, variables, headersFor({ key: "secret", user: "token", admin: true }));
      let node: any = r.body?.data;
      for (const s of parents) node = Array.isArray(node?.[s.field.name]) ? node[s.field.name][0] : node?.[s.field.name];
      if (node) return variables;
    }
    return undefined;
  }

  describe.each(TARGETS.map((t) => [t.coordinate, t] as const))("GraphQL %s", (_coordinate, target) => {
    it(`${RUNS_PER_GRAPHQL_TARGET[target.operation]} generated calls: never INTERNAL_SERVER_ERROR or a 5xx; a rejected one changes nothing`, async () => {
      const query = documentFor(target);
      const ids = target.operation === "query" ? queryIds : writeIds;
      const reaching = await reachingParentArgs(target);
      const parentArgs = target.path
        .slice(0, -1)
        .map((s, i) => argsRecord(s.field.args, i, (a) => goodValue(a.type, a.name, ids)));
      const parents = reaching ? fc.constant(reaching) : fc.tuple(...parentArgs).map((all) => Object.assign({}, ...all));
      const call = fc.record({ parents, own: targetVariables(target, ids), creds, get: fc.boolean() });
      await fc.assert(
        fc.asyncProperty(call, async ({ parents: p, own, creds: c, get }) => {
          const variables = { ...p, ...own };
          const headers = headersFor(c);
          let r: { status: number; body: any };
          if (get && target.operation === "query") {
            const qs = new URLSearchParams({ query, variables: JSON.stringify(variables) });
            r = await h.call("GET", `/graphql?${qs}`, { headers: { ...headers, accept: "application/graphql-response+json" } });
          } else {
            r = await h.gql(query, variables, headers);
          }
          const what = describeRequest({ query, variables, headers, status: r.status, body: r.body });
          expect(r.status, what).toBeLessThan(500);
          const codes = (r.body?.errors ?? []).map((e: any) => e.extensions?.code);
          expect(codes, what).not.toContain("INTERNAL_SERVER_ERROR");
          // A query never writes; a mutation may, unless it was refused.
          const { rejected, counted } = target.operation === "query" ? { rejected: true, counted: false } : mutationOutcome(r.body, target.path[0].field.name);
          await expectUnchangedIf(rejected && !counted, what);
        }),
        { numRuns: RUNS_PER_GRAPHQL_TARGET[target.operation] },
      );
    });
  });
});
