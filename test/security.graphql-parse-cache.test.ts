// What a stranger's documents leave behind in a gateway's memory (docs/security.md, "Input,
// tenants and pages"): yoga keeps each parsed document, with its validation result, and each
// parse error, keyed by the document's text. Those caches held 1,024 of each for an hour, whatever
// their size: 1,024 different documents of 1,900 tokens each, sent without a key, kept about
// 1 GB of heap in a process (some 500 bytes a token), 1,024 refused ones 0.3 GB, and 1,024
// documents padded with a 60 KB comment 70 MB. Now both caches are bounded by what their entries
// hold: documents by their tokens and characters, errors by the length of their text. The
// project's own operations are a few thousand tokens together, so they stay.
import { Lexer, Source, TokenKind } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATIONS } from "../dashboard/src/operations.ts";
import { BYTES_PER_CHAR, BYTES_PER_TOKEN, DOCUMENT_CACHE_BYTES, ERROR_CACHE_CHARS, parseCachesOf } from "../src/graphql/parse-cache.ts";
import { startHarness, type Harness } from "./support/app.ts";
import { backends } from "./support/db.ts";

function tokensIn(text: string): number {
  const lexer = new Lexer(new Source(text));
  let n = 0;
  while (lexer.advance().kind !== TokenKind.EOF) n++;
  return n;
}

describe.each(backends)("GraphQL documents kept in memory on %s", (backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(() => h?.close());

  /** A POST to /graphql with no key at all: anybody can send one. */
  async function post(query: string) {
    const res = await h.app.fetch(
      new Request("http://linkgate.test/graphql", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ query }) }),
    );
    return { status: res.status, body: await res.json() };
  }

  const caches = () => parseCachesOf(h.app.deps)!;
  /** What the kept documents are reckoned to cost: their tokens and their characters. */
  const keptBytes = () => [...caches().documentCache.keys()].reduce((n, text) => n + BYTES_PER_TOKEN * tokensIn(text) + BYTES_PER_CHAR * text.length, 0);
  const keptErrorChars = () => [...caches().errorCache.keys()].reduce((n, text) => n + text.length, 0);

  it("keeps the project's own operations, and strangers' documents only up to a bound", async () => {
    const own = OPERATIONS.IdentityProviders;
    await post(own);
    expect(caches().documentCache.has(own)).toBe(true);

    // 40 different documents of 1,900 tokens each, under the token limit and the body limit
    const fields = "__typename ".repeat(1_900);
    for (let i = 0; i < 40; i++) {
      const doc = `query Q${i} { ${fields} }`;
      expect(Buffer.byteLength(doc)).toBeLessThan(64 * 1024);
      expect((await post(doc)).status).toBeLessThan(500);
    }
    expect(keptBytes()).toBeLessThanOrEqual(DOCUMENT_CACHE_BYTES);
    expect(caches().documentCache.size).toBeGreaterThan(0); // still a cache

    // Few tokens, many characters: 150 documents of a 60 KB comment each
    const comment = `# ${"x".repeat(60_000)}`;
    for (let i = 0; i < 150; i++) expect((await post(`{ __typename } # ${i}\n${comment}`)).status).toBe(200);
    expect(keptBytes()).toBeLessThanOrEqual(DOCUMENT_CACHE_BYTES);

    // The project's own operation is simply parsed again, and answers as before.
    expect((await post("{ __typename }")).body).toEqual({ data: { __typename: "Query" } });
  });

  it("keeps strangers' refused documents only up to a bound in characters", async () => {
    const tooMany = "__typename ".repeat(h.config.graphqlLimits.maxTokens + 100);
    for (let i = 0; i < 40; i++) {
      const res = await post(`query R${i} { ${tooMany} }`);
      expect(res.status).toBe(400);
    }
    expect(keptErrorChars()).toBeLessThanOrEqual(ERROR_CACHE_CHARS);
  });
});
