// A document nested deeper than the parser's stack (docs/graphql.md, "Operation limits"). graphql-js
// parses a list or object literal by recursion, so `{ eventTypes(x: [[[…]]]) }` nested about
// 2,000 deep, which anyone could send without a key, ran out of stack while it was parsed, before
// the token limit had counted its 2,001st token: a 500 INTERNAL_SERVER_ERROR and an error logged
// for every such request, by POST and by GET alike. With the token limit raised, documents within
// it did the same. Now brackets nest at most MAX_NESTING deep: deeper is 400 QUERY_TOO_COMPLEX
// before the parser starts, and nothing runs.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_NESTING } from "../src/graphql/limits.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";

const lists = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;
const objects = (depth: number) => `${"{a: ".repeat(depth)}1${"}".repeat(depth)}`;

describe.each(backends)("GraphQL documents nested too deeply on %s", (backend) => {
  let h: Harness;
  let roomy: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
    // an operator who raised the token limit: the nesting is then within it
    roomy = await startHarness(backend, { env: { LINKGATE_GRAPHQL_MAX_TOKENS: "30000" } });
  });
  afterAll(async () => {
    await h?.close();
    await roomy?.close();
  });

  const post = (harness: Harness, query: string) =>
    harness.call("POST", "/graphql", { body: { query }, headers: { "x-api-key": "", accept: "application/graphql-response+json, application/json" } });

  const expectRefused = (res: { status: number; body: any }) => {
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.data).toBeUndefined();
    expect(res.body.errors).toHaveLength(1);
    expect(res.body.errors[0].extensions.code).toBe("QUERY_TOO_COMPLEX");
    expect(res.body.errors[0].message).toBe(`Nesting limit of ${MAX_NESTING} exceeded.`);
  };

  it("refuses a list literal nested 3,000 deep with 400 QUERY_TOO_COMPLEX, by POST and by GET, not a 500", async () => {
    const query = `{ eventTypes(x: ${lists(3000)}) }`;
    expectRefused(await post(h, query));
    const get = await h.call("GET", `/graphql?query=${encodeURIComponent(query)}`, { headers: { accept: "application/json" } });
    expectRefused(get);
  });

  it("refuses deep nesting within a raised token limit: lists, objects and selections", async () => {
    expectRefused(await post(roomy, `mutation { finishPasskeySignIn(response: ${lists(5000)}) { __typename } }`));
    expectRefused(await post(roomy, `mutation { finishPasskeySignIn(response: ${objects(5000)}) { __typename } }`));
    expectRefused(await post(roomy, `{ ${"a { ".repeat(5000)}b${" }".repeat(5000)} }`));
  });

  it("still answers a document nested to the limit, and reports a syntax error deep inside as a syntax error", async () => {
    // the selection and `finishPasskeySignIn(` take two levels, the literal the rest
    const atLimit = await h.gql(`mutation { finishPasskeySignIn(response: ${lists(MAX_NESTING - 2)}) { __typename } }`, {}, { "x-api-key": h.publishableKey });
    expect(atLimit.body).toEqual({ data: { finishPasskeySignIn: { __typename: "PasskeyInvalid" } } });
    expectRefused(await post(h, `mutation { finishPasskeySignIn(response: ${lists(MAX_NESTING - 1)}) { __typename } }`));

    const broken = await post(h, `{ eventTypes(x: [[[ "unterminated ]]]) }`);
    expect(broken.body.errors[0].extensions.code).toBe("GRAPHQL_PARSE_FAILED");
  });
});
