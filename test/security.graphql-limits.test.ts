// One request must not take the server down (issue 9): documents over the GraphQL limits are
// refused before they run — HTTP 400, QUERY_TOO_COMPLEX, without a database statement and
// without lasting memory, by a limit whose work is bounded (counted, never timed) — while every
// operation the project itself sends still passes.
//
// Database statements are counted by a second app over the same database whose Prisma client
// goes through a counting decorator of the real driver adapter: every statement still reaches
// PGlite or Postgres, the wrapper only counts them.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { formatPrismaCursor } from "@pothos/plugin-prisma";
import { PrismaPg } from "@prisma/adapter-pg";
import type { SqlDriverAdapterFactory } from "@prisma/driver-adapter-utils";
import { getIntrospectionQuery, getNamedType, parse as graphqlParse, GraphQLError, isObjectType, Kind } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATIONS } from "../dashboard/src/operations.ts";
import { OPERATIONS as PAGE_OPERATIONS } from "../pages/src/operations.ts";
import { buildApp, type App } from "../src/app.ts";
import { PrismaClient } from "../src/generated/prisma/client.ts";
import { schema } from "../src/graphql/schema/index.ts";
import { createGraphQL } from "../src/graphql/yoga.ts";
import { createLogger } from "../src/log.ts";
import { EVENT_TYPES } from "../src/webhooks/event-types.ts";
import { CreateWebhookDocument } from "./generated/operations.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { backends, type Backend } from "./support/db.ts";
import { refusalWork } from "./support/graphql-work.ts";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** `{a0:webhooks{stats{successRate}} a1:…}` with 1,900 aliases, as issue 9 sent it (list shape). */
const aliasBombAsReported = `{${Array.from({ length: 1900 }, (_, i) => `a${i}:webhooks{stats{successRate}}`).join(" ")}}`;

/** The same against the connection; a fragment keeps it under the 64 KiB body limit. */
const aliasBomb = `{${Array.from({ length: 1900 }, (_, i) => `a${i}:webhooks(first:100){...S}`).join(" ")}}
fragment S on QueryWebhooksConnection{edges{node{stats{successRate}}}}`;

/**
 * viewer → mergedSecondary → … through fragments A0, B0, A1, B1 … each spreading the next one
 * twice under two aliases: 2^levels objects from a document of about 1.5 KB.
 */
function fragmentBomb(levels = 17): string {
  const name = (i: number) => `${i % 2 ? "B" : "A"}${i}`;
  const fragments = Array.from({ length: levels }, (_, i) =>
    i === levels - 1
      ? `fragment ${name(i)} on Account{id name email}`
      : `fragment ${name(i)} on Account{id x:mergedSecondary{...${name(i + 1)}} y:mergedSecondary{...${name(i + 1)}}}`,
  );
  return `{viewer{...${name(0)}}}\n${fragments.join("\n")}`;
}

/** Decorates a driver adapter factory: every statement goes through, and is counted. */
function countingAdapter(factory: SqlDriverAdapterFactory) {
  let statements = 0;
  const counted = <T extends object>(target: T): T =>
    new Proxy(target, {
      get(t, prop) {
        const value = Reflect.get(t, prop, t);
        if (typeof value !== "function") return value;
        if (prop === "queryRaw" || prop === "executeRaw") {
          return (...args: unknown[]) => {
            statements++;
            return value.apply(t, args);
          };
        }
        if (prop === "startTransaction" || prop === "connect") return async (...args: unknown[]) => counted(await value.apply(t, args));
        return value.bind(t);
      },
    });
  return { factory: counted(factory), statements: () => statements };
}

/** The second app: on `h`'s database, through a Prisma client whose statements are counted. */
async function countingApp(h: Harness, backend: Backend): Promise<{ app: App; prisma: PrismaClient; statements: () => number }> {
  const counter = countingAdapter(backend === "pglite" ? h.db.adapterFactory : new PrismaPg(h.db.url!));
  const prisma = new PrismaClient({ adapter: counter.factory });
  // the caller never gets a client to disconnect if the app does not start
  const app = await buildApp(h.config, { db: { ...h.db, prisma }, logger: createLogger("silent") }).catch(async (err) => {
    await prisma.$disconnect();
    throw err;
  });
  return { app, prisma, statements: counter.statements };
}

/** The GraphQL documents of the README: its ```graphql blocks. */
function readmeDocuments(): string[] {
  const readme = readFileSync(path.join(root, "README.md"), "utf8");
  return [...readme.matchAll(/```graphql\n([\s\S]*?)```/g)].map((m) => m[1]);
}

describe.each(backends)("GraphQL operation limits on %s", (backend) => {
  let h: Harness;
  let app: App;
  let prisma: PrismaClient;
  let statements: () => number;
  let userToken: string;

  beforeAll(async () => {
    h = await startHarness(backend);
    for (let i = 0; i < 20; i++) {
      const r = await h.op(CreateWebhookDocument, { input: { url: `http://127.0.0.1:9/hook/${i}`, events: [...EVENT_TYPES], description: `hook ${i}` } });
      if (r.createWebhook.__typename !== "CreateWebhookPayload") throw new Error(r.createWebhook.__typename);
    }
    userToken = (await h.signIn({ email: "ada@example.com" })).token;
    ({ app, prisma, statements } = await countingApp(h, backend));
  });
  afterAll(async () => {
    await app?.close();
    await prisma?.$disconnect();
    await h?.close();
  });

  async function post(query: string, headers: Record<string, string> = { "x-api-key": h.apiKey }, init: { operationName?: string; variables?: unknown } = {}) {
    const res = await app.fetch(
      new Request("http://linkgate.test/graphql", {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/graphql-response+json, application/json", ...headers },
        body: JSON.stringify({ query, ...init }),
      }),
    );
    return { status: res.status, body: (await res.json()) as { data?: any; errors?: { message: string; extensions?: { code?: string } }[] } };
  }

  /** Sends `query`; expects a refusal with no statement run, and returns its message. */
  async function expectRefused(query: string, headers?: Record<string, string>) {
    const before = statements();
    const res = await post(query, headers);
    expect(res.status).toBe(400);
    expect(res.body.data).toBeUndefined();
    expect(res.body.errors).toHaveLength(1);
    expect(res.body.errors![0].extensions?.code).toBe("QUERY_TOO_COMPLEX");
    expect(statements() - before).toBe(0);
    return { message: res.body.errors![0].message };
  }

  const userHeaders = () => ({ "x-api-key": h.publishableKey, authorization: `Bearer ${userToken}` });

  it("counts statements: an ordinary query runs some (the counter works)", async () => {
    const before = statements();
    const res = await post(`{ webhooks(first: 1) { edges { node { id } } } }`);
    expect(res.body.errors).toBeUndefined();
    expect(statements()).toBeGreaterThan(before);
  });

  it("refuses the 1,900-alias document while parsing, at its 2,001st token, before any walk or validation and without a database statement", async () => {
    // The parser stops at the token over the limit (the nesting check before it reads no more
    // tokens either): nothing of the rest of the 64 KiB is parsed, walked or validated.
    for (const doc of [aliasBomb, aliasBombAsReported]) {
      expect(Buffer.byteLength(doc)).toBeLessThan(64 * 1024);
      expect((await expectRefused(doc)).message).toBe("Token limit of 2000 exceeded.");
      expect(refusalWork(app.deps, doc)).toEqual({ refusal: "Token limit of 2000 exceeded.", stage: "parse", selectionSetsRead: 0 });
    }
  });

  it("refuses the recursive fragment bomb through viewer/mergedSecondary at the 10,001st of the 393,214 fields it spreads to, before validation and without a database statement", async () => {
    const doc = fragmentBomb(17);
    expect(Buffer.byteLength(doc)).toBeLessThan(2048);
    const message = "Field limit of 10000 exceeded, fragments expanded.";
    expect((await expectRefused(doc, userHeaders())).message).toBe(message);
    // The field walk stops at its 10,001st field, before the cost rule and graphql-js' rules
    // run: it reads at most one selection set a field (6,674 here). Spread out, the document
    // holds 262,143 selection sets (each fragment but the last spreads the next one twice).
    const work = refusalWork(app.deps, doc);
    expect(work).toEqual({ refusal: message, stage: "limits", selectionSetsRead: expect.any(Number) });
    expect(work.selectionSetsRead).toBeLessThanOrEqual(10_001);
  });

  it("leaves no lasting memory behind after 20 of each", async () => {
    const rss = () => process.memoryUsage().rss;
    await expectRefused(aliasBomb); // warm: first-use allocations are not growth
    const before = rss();
    for (let i = 0; i < 20; i++) {
      await expectRefused(aliasBomb);
      await expectRefused(aliasBombAsReported);
      await expectRefused(fragmentBomb(17), userHeaders());
    }
    expect(rss() - before).toBeLessThan(50 * 1024 * 1024);
  });

  it("refuses each limit on its own: aliases, depth, directives, cost, tokens", async () => {
    const aliases = `{ ${Array.from({ length: h.config.graphqlLimits.maxAliases + 1 }, (_, i) => `a${i}: eventTypes`).join(" ")} }`;
    expect((await expectRefused(aliases)).message).toMatch(/Aliases limit/);
    const typenames = `{ ${Array.from({ length: h.config.graphqlLimits.maxAliases + 1 }, (_, i) => `t${i}: __typename`).join(" ")} }`;
    expect((await expectRefused(typenames)).message).toMatch(/Aliases limit/);

    // Depth 200 on mergedSecondary, the recursion issue 10 hit: refused before any resolver.
    const deep = `{ viewer { ${"mergedSecondary { ".repeat(200)}id${" }".repeat(200)} } }`;
    expect((await expectRefused(deep, userHeaders())).message).toMatch(/depth limit/);

    const directives = `{ eventTypes ${"@include(if: true) ".repeat(h.config.graphqlLimits.maxDirectives + 1)}}`;
    expect((await expectRefused(directives)).message).toMatch(/Directives limit/);

    // Small and shallow, but 100 webhooks × 100 deliveries each.
    const cost = `{ webhooks(first: 100) { edges { node { deliveries(first: 100) { edges { node { id attemptLog { id } } } } } } } }`;
    expect((await expectRefused(cost)).message).toMatch(/Cost limit/);
    // The same with the page sizes in variables, or left out: priced at the largest page.
    const byVariables = `query($a: Int, $b: Int) { webhooks(first: $a) { edges { node { deliveries(first: $b) { edges { node { id } } } } } } }`;
    expect((await expectRefused(byVariables)).message).toMatch(/Cost limit/);
    const byDefault = `{ webhooks { edges { node { deliveries { edges { node { id } } } } } } }`;
    expect((await expectRefused(byDefault)).message).toMatch(/Cost limit/);
    // Both first and last: the connection returns `first` rows, so the larger one is the price
    // (armor's rule alone read only `last` here and priced 100 × 100 rows as one).
    const both = `{ webhooks(last: 1, first: 100) { edges { node { deliveries(last: 1, first: 100) { edges { node { id } } } } } } }`;
    expect((await expectRefused(both)).message).toMatch(/Cost limit/);
    const bothByVariable = `query($n: Int) { webhooks(last: 1, first: $n) { edges { node { deliveries(first: 1, last: $n) { edges { node { id } } } } } } }`;
    expect((await expectRefused(bothByVariable)).message).toMatch(/Cost limit/);

    const tokens = `{ ${"eventTypes ".repeat(h.config.graphqlLimits.maxTokens)}}`;
    expect((await expectRefused(tokens)).message).toMatch(/Token limit/);
  });

  it("prices a delivery chart at the points it reads, so a page of webhooks' charts is not one value each", async () => {
    // Each chart reads 28 points (a week) in two statements, whatever is selected of it; priced
    // as one value, 30 aliases of a page of 20 webhooks' charts (cost 1,800) ran 600 charts, and
    // 10 aliases of their points (cost 2,200) answered 5,600 points (docs/graphql.md, "Operation limits").
    const alias = (n: number, field: string) => `{ ${Array.from({ length: n }, (_, i) => `a${i}: ${field}`).join(" ")} }`;
    expect((await expectRefused(alias(30, `webhooks(first: 20) { edges { node { deliveryChart(range: week) { range } } } }`))).message).toMatch(/Cost limit/);
    expect((await expectRefused(alias(10, `webhooks(first: 20) { edges { node { deliveryChart(range: week) { points { start } } } } }`))).message).toMatch(/Cost limit/);
    // 30 project charts hold 30 × 28 points × 7 values
    expect((await expectRefused(alias(30, `deliveryChart(range: week) { points { start end succeeded retried failed p50Ms p95Ms } }`))).message).toMatch(/Cost limit/);
    // one chart, as the dashboard asks for it, still runs
    const one = await post(OPERATIONS.ProjectChart, undefined, { variables: { range: "week" } });
    expect(one.body.errors).toBeUndefined();
    expect(one.body.data.deliveryChart.points).toHaveLength(28);
  });

  it("answers 400 even to a client that accepts only application/json", async () => {
    const before = statements();
    const res = await post(aliasBomb, { "x-api-key": h.apiKey, accept: "application/json" });
    expect(res.status).toBe(400);
    expect(res.body.errors?.[0].extensions?.code).toBe("QUERY_TOO_COMPLEX");
    expect(statements()).toBe(before);
  });

  it("refuses introspection that nests types within types, and lets GraphiQL's own introspection through", async () => {
    const bomb = `{ __schema { types { fields { type { fields { type { fields { type { fields { name } } } } } } } } } }`;
    await expectRefused(bomb);
    for (const options of [{}, { descriptions: true, specifiedByUrl: true, directiveIsRepeatable: true, schemaDescription: true, inputValueDeprecation: true, oneOf: true }]) {
      const res = await post(getIntrospectionQuery(options));
      expect(res.status).toBe(200);
      expect(res.body.errors).toBeUndefined();
      expect(res.body.data.__schema.types.length).toBeGreaterThan(20);
    }
  });

  it("asks for the whole schema once per operation: aliases of __schema are refused before they run", async () => {
    // Depth and cost skip __schema (GraphiQL's query needs that), and each answer is the whole
    // schema: 30 aliases of it, a 13 KB document sent without a key, answered 6 MB.
    const full = getIntrospectionQuery({ descriptions: true });
    const selection = full.slice(full.indexOf("__schema") + "__schema".length, full.indexOf("fragment FullType")).trim().replace(/\}\s*$/, "");
    const fragments = full.slice(full.indexOf("fragment FullType"));
    const many = `query { ${Array.from({ length: 30 }, (_, i) => `a${i}: __schema ${selection}`).join(" ")} }\n${fragments}`;
    expect((await expectRefused(many, {})).message).toMatch(/Introspection limit/);
    // two names through fragments, spread inline or by name
    const spread = `{ ... on Query { a: __schema { queryType { name } } } ...S } fragment S on Query { b: __schema { queryType { name } } }`;
    expect((await expectRefused(spread, {})).message).toMatch(/Introspection limit/);
    // the same name twice is one answer, and one operation of a document at a time is counted
    const merged = `query A { __schema { queryType { name } } ...S } query B { __schema { types { name } } } fragment S on Query { __schema { queryType { name } } }`;
    const one = await post(merged, {}, { operationName: "A" });
    expect(one.status).toBe(200);
    expect(one.body.data.__schema.queryType.name).toBe("Query");
  });

  it("counts the fields at one place of the answer: the same field asked for again and again is refused before validation compares every pair", async () => {
    // graphql-js compares every pair of fields at one place of the answer, and their selections
    // again: 490 copies of `viewer { id }` (6 KB, within every other limit, no key) took 250 ms
    const copies = (n: number, field: string) => `{ ${Array.from({ length: n }, () => field).join(" ")} }`;
    expect((await expectRefused(copies(490, "viewer { id }"), {})).message).toBe('Limit of 30 fields at one place of the answer exceeded, found 31 of "viewer".');
    // ten copies, each holding ten copies of a field, put a hundred at one place below them
    expect((await expectRefused(copies(10, `viewer { ${"id ".repeat(10)}}`), {})).message).toMatch(/found 31 of "id"/);
    // spread at one place through fragments
    const names = Array.from({ length: 31 }, (_, i) => `F${i}`);
    const spreads = `{ ${names.map((f) => `...${f}`).join(" ")} } ${names.map((f) => `fragment ${f} on Query { viewer { id } }`).join(" ")}`;
    expect((await expectRefused(spreads, {})).message).toMatch(/found 31 of "viewer"/);
    // thirty at one place is a document like any other
    expectAllowed("thirty copies", copies(30, "viewer { id }"));
  });

  /**
   * Ordinary documents: parsed and validated by the server's own GraphQL pipeline (the same
   * plugins, limits included) without running them, since some are mutations. Returns what
   * refused them: nothing, for a document within the limits and valid against the schema.
   */
  function refusals(source: string, operationName?: string): string[] {
    const yoga = createGraphQL(app.deps);
    const request = new Request("http://linkgate.test/graphql", { method: "POST" });
    const { parse, validate, schema: served } = yoga.getEnveloped({ request, params: { query: source, operationName } });
    try {
      return validate(served, parse(source)).map((e: Error) => e.message);
    } catch (err) {
      return [`${(err as GraphQLError).extensions?.code}: ${(err as Error).message}`];
    }
  }

  /** Each operation of the document in turn, as a client names the one it sends. */
  function expectAllowed(name: string, source: string) {
    const operations = graphqlParse(source).definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);
    for (const op of operations) expect(refusals(source, op.name?.value), `${name} ${op.name?.value ?? ""}`).toEqual([]);
  }

  it("the pipeline check refuses what the server refuses", () => {
    expect(refusals(aliasBomb)[0]).toMatch(/^QUERY_TOO_COMPLEX: Token limit/);
    expect(refusals(fragmentBomb(17))[0]).toMatch(/^QUERY_TOO_COMPLEX/);
    expect(refusals(`{ webhooks { nope } }`)).toHaveLength(1);
  });

  it("allows every operation in test/operations", async () => {
    const dir = path.join(root, "test/operations");
    const files = readdirSync(dir).filter((f) => f.endsWith(".graphql"));
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) expectAllowed(f, readFileSync(path.join(dir, f), "utf8"));
  });

  it("allows every operation the dashboard sends, and runs its overview over 20 webhooks", async () => {
    for (const [name, doc] of Object.entries(OPERATIONS)) expectAllowed(name, doc);
    const overview = await post(OPERATIONS.Overview, undefined, { variables: { first: 100 } });
    expect(overview.body.errors).toBeUndefined();
    expect(overview.body.data.webhooks.edges).toHaveLength(20);
    expect(overview.body.data.webhooks.edges.every((e: { node: { stats: unknown } }) => e.node.stats)).toBe(true);
  });

  it("allows every operation the hosted sign-in and account pages send", () => {
    for (const [name, doc] of Object.entries(PAGE_OPERATIONS)) expectAllowed(name, doc);
  });

  it("allows the README's GraphQL examples", () => {
    readmeDocuments().forEach((doc, i) => expectAllowed(`README example ${i + 1}`, doc));
  });
});

describe.each(backends)("bounded lists and inputs on %s", (backend) => {
  let h: Harness;
  let app: App;
  let prisma: PrismaClient;
  let statements: () => number;
  let webhookId: string;

  beforeAll(async () => {
    // a page and more of webhooks: more than a project holds by default
    h = await startHarness(backend, { env: { LINKGATE_WEBHOOKS_PER_PROJECT: "25" } });
    for (let i = 0; i < 25; i++) {
      const r = await h.op(CreateWebhookDocument, { input: { url: `http://127.0.0.1:9/hook/${i}`, events: ["user.created"], description: `hook ${i}` } });
      if (r.createWebhook.__typename !== "CreateWebhookPayload") throw new Error(r.createWebhook.__typename);
      webhookId ??= r.createWebhook.webhook.id;
    }
    ({ app, prisma, statements } = await countingApp(h, backend));
  });
  afterAll(async () => {
    await app?.close();
    await prisma?.$disconnect();
    await h?.close();
  });

  const gql = (query: string, variables?: Record<string, unknown>) => h.gql(query, variables);
  /** `query`'s answer (sent with the secret key) and how many statements it ran. */
  async function withStatements<T>(query: string): Promise<{ data: T; ran: number }> {
    const start = statements();
    const res = await app.fetch(
      new Request("http://linkgate.test/graphql", {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": h.apiKey },
        body: JSON.stringify({ query }),
      }),
    );
    const { data } = (await res.json()) as { data: T };
    return { data, ran: statements() - start };
  }

  it("pages through webhooks: 20 by default, oldest first, then after the cursor", async () => {
    const page = `query($after: String) { webhooks(after: $after) { pageInfo { hasNextPage endCursor } edges { node { description } } } }`;
    const first = await gql(page);
    expect(first.body.data.webhooks.edges.map((e: { node: { description: string } }) => e.node.description)).toEqual(
      Array.from({ length: 20 }, (_, i) => `hook ${i}`),
    );
    expect(first.body.data.webhooks.pageInfo.hasNextPage).toBe(true);
    const rest = await gql(page, { after: first.body.data.webhooks.pageInfo.endCursor });
    expect(rest.body.data.webhooks.edges).toHaveLength(5);
    expect(rest.body.data.webhooks.pageInfo.hasNextPage).toBe(false);
  });

  it("refuses a first over 100 with BAD_USER_INPUT, on webhooks and on deliveries", async () => {
    // Through variables: a literal this large is already over the cost budget.
    for (const [query, first] of [
      [`query($first: Int) { webhooks(first: $first) { edges { node { id } } } }`, 101],
      [`query($first: Int) { webhook(id: "${webhookId}") { deliveries(first: $first) { edges { node { id } } } } }`, 1_000_000],
    ] as const) {
      const res = await gql(query, { first });
      expect(res.status).toBeLessThan(500);
      expect(res.body.errors?.[0].extensions?.code).toBe("BAD_USER_INPUT");
      expect(res.body.errors?.[0].message).toMatch(/at most 100/);
    }
    expect((await gql(`{ webhooks(first: 100) { edges { node { id } } } }`)).body.data.webhooks.edges).toHaveLength(25);
  });

  it("refuses a negative first or last with BAD_USER_INPUT", async () => {
    for (const args of ["first: -1", "last: -1"]) {
      const res = await gql(`{ webhooks(${args}) { edges { node { id } } } }`);
      expect(res.status).toBeLessThan(500);
      expect(res.body.errors?.[0].extensions?.code, JSON.stringify(res.body)).toBe("BAD_USER_INPUT");
      expect(res.body.errors?.[0].message).toMatch(/must be a non-negative integer/);
    }
  });

  it("refuses junk and forged cursors with BAD_USER_INPUT, on webhooks and on deliveries", async () => {
    const forged = [
      "!!!",
      formatPrismaCursor({ id: "wh_\u0000x" }, "id"), // a NUL byte Postgres would refuse
      formatPrismaCursor({ id: 12 }, "id"),
      Buffer.from("GPC:S:' OR 1=1 --").toString("base64"),
    ];
    for (const after of forged) {
      for (const query of [
        `query($after: String) { webhooks(after: $after) { edges { node { id } } } }`,
        `query($after: String) { webhook(id: "${webhookId}") { deliveries(after: $after) { edges { node { id } } } } }`,
      ]) {
        const res = await gql(query, { after });
        expect(res.status, after).toBeLessThan(500);
        expect(res.body.errors?.[0].extensions?.code, after).toBe("BAD_USER_INPUT");
      }
    }
  });

  it("answers a deliveries filter on a type that does not exist with BAD_USER_INPUT, not a fault", async () => {
    for (const eventType of ["x".repeat(60_000), "user.created' OR 1=1 --", "ü🙂", ""]) {
      const res = await gql(`query($id: ID!, $t: String) { webhook(id: $id) { deliveries(eventType: $t) { totalCount } } }`, { id: webhookId, t: eventType });
      expect(res.status).toBeLessThan(500);
      expect(res.body.errors?.[0].extensions?.code).toBe("BAD_USER_INPUT");
    }
    const alias = await gql(`query($id: ID!) { webhook(id: $id) { deliveries(eventType: "auth.login.success") { totalCount } } }`, { id: webhookId });
    expect(alias.body).toEqual({ data: { webhook: { deliveries: { totalCount: 0 } } } });
  });

  it("answers a junk events cursor and a page out of range with a typed InvalidRequest", async () => {
    const events = `query($after: String, $first: Int) { events(after: $after, first: $first) { __typename ... on Error { message } ... on EventPage { hasMore } } }`;
    const outOfRange = Buffer.from("v1:9999999999999999999").toString("base64url");
    for (const vars of [{ after: "!!!" }, { after: outOfRange }, { first: 0 }, { first: 101 }, { first: -1 }]) {
      const res = await gql(events, vars);
      expect(res.status, JSON.stringify(vars)).toBe(200);
      expect(res.body.data.events.__typename, JSON.stringify(vars)).toBe("InvalidRequest");
    }
    expect((await gql(events, { first: 100 })).body.data.events.__typename).toBe("EventPage");
  });

  it("answers a replay since a time Postgres cannot store with a typed InvalidRequest", async () => {
    const replay = `mutation($id: ID!, $since: DateTime!) { replayFailedWebhookDeliveries(webhookId: $id, since: $since) { __typename ... on Error { message } } }`;
    for (const since of ["0000-01-01T00:00:00Z", "+010000-01-01T00:00:00Z", "-000001-01-01T00:00:00Z"]) {
      const res = await gql(replay, { id: webhookId, since });
      // The DateTime scalar refuses some of these texts itself (400, before anything runs);
      // what it lets through reaches the resolver and is refused there.
      if (res.status === 400) expect(res.body.errors?.[0].message, since).toMatch(/DateTime cannot represent/);
      else expect(res.body.data.replayFailedWebhookDeliveries.__typename, since).toBe("InvalidRequest");
    }
    const ok = await gql(replay, { id: webhookId, since: "0001-01-01T00:00:00Z" });
    expect(ok.body.data.replayFailedWebhookDeliveries.__typename).toBe("ReplayFailedDeliveriesPayload");
  });

  it("reads the stats of a whole page of webhooks in as many statements as one webhook's", async () => {
    const withStats = (first: number) => `{ webhooks(first: ${first}) { edges { node { id stats { succeeded successRate lastSuccessAt } } } } }`;
    const count = async (first: number) => {
      const { data, ran } = await withStatements<{ webhooks: { edges: unknown[] } }>(withStats(first));
      expect(data.webhooks.edges).toHaveLength(first);
      return ran;
    };
    await count(1); // warm: per-process caches (keys) are not what is measured
    const one = await count(1);
    const page = await count(25);
    expect(page).toBe(one);
  });

  it("reads the attempt counts of a page of deliveries in as many statements as one delivery's", async () => {
    // attemptCount is priced as one value a delivery: it is counted in the statement that reads
    // the page, not in a statement of its own for each delivery
    for (let i = 0; i < 5; i++) {
      const sent = await gql(`mutation($id: ID!) { sendTestWebhook(webhookId: $id, eventType: "user.created") { __typename } }`, { id: webhookId });
      expect(sent.body.data.sendTestWebhook.__typename).toBe("SendTestWebhookPayload");
    }
    const count = async (first: number) => {
      const query = `{ webhook(id: "${webhookId}") { deliveries(first: ${first}) { edges { node { id attemptCount } } } } }`;
      const { data, ran } = await withStatements<{ webhook: { deliveries: { edges: { node: { attemptCount: number } }[] } } }>(query);
      expect(data.webhook.deliveries.edges.map((e) => e.node.attemptCount)).toEqual(Array(first).fill(0));
      return ran;
    };
    await count(1); // warm: per-process caches (keys) are not what is measured
    expect(await count(5)).toBe(await count(1));
  });

  it("gives mergedSecondary a type with no way back to an account", () => {
    const account = schema.getType("Account");
    if (!isObjectType(account)) throw new Error("Account");
    const merged = getNamedType(account.getFields().mergedSecondary.type);
    expect(merged.name).toBe("MergedAccount");
    if (!isObjectType(merged)) throw new Error("MergedAccount");
    // Objects reachable from MergedAccount: only identifiers, an external sign-in's profile
    // claims and a page of passkeys (scalars), which lead nowhere further.
    const reachable = new Set<string>();
    const walk = (type: ReturnType<typeof getNamedType>) => {
      if (!isObjectType(type) || reachable.has(type.name)) return;
      reachable.add(type.name);
      for (const f of Object.values(type.getFields())) walk(getNamedType(f.type));
    };
    walk(merged);
    expect([...reachable].sort()).toEqual([
      "ExternalProfile",
      "Identifier",
      "MergedAccount",
      "MergedAccountPasskeysConnection",
      "MergedAccountPasskeysConnectionEdge",
      "PageInfo",
      "Passkey",
    ]);
  });
});
