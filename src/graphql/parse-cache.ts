// The caches of parsed documents and of parse errors that yoga keeps in each process (its
// parserAndValidationCache; a document's validation result lives as long as the document).
// Keyed by the document's text, so anybody can fill them, without a key (docs/graphql.md,
// "Documents kept"; docs/security.md, "Input, tenants and pages"). yoga's own held 1,024
// entries of each for an hour, whatever their size: a parsed document costs some 500 bytes a
// token, so 1,024 different documents of 1,900 tokens (under every GraphQL limit and the 64 KiB
// body limit) kept about 1 GB of heap, and 1,024 refused ones about 0.3 GB. Here each cache is
// bounded by what its entries hold as well. Evicting a document costs only its parse and
// validation the next time it comes: nothing a client sees, so a flood of documents cannot take
// anything from a user but a little CPU.
import type { DocumentNode, Token } from "graphql";
import { LRUCache } from "lru-cache";

/**
 * What a kept document is reckoned to cost: 512 bytes a token (its nodes, locations and token
 * list, measured at about 500), and 2 a character of its text (the key; a comment is one token
 * of any length).
 */
export const BYTES_PER_TOKEN = 512;
export const BYTES_PER_CHAR = 2;
/**
 * The most the kept documents are reckoned to cost together. Every operation of the dashboard and
 * the hosted pages together is some 2,300 tokens, about 1.2 MB of this.
 */
export const DOCUMENT_CACHE_BYTES = 16 * 1024 * 1024;
/** The most characters the documents of kept parse errors hold together (a few MB at most). */
export const ERROR_CACHE_CHARS = 256 * 1024;
/** yoga's own bound on entries, and how long one is kept. */
const MAX_ENTRIES = 1024;
const TTL_MS = 3_600_000;

export type ParseCaches = { documentCache: LRUCache<string, DocumentNode>; errorCache: LRUCache<string, object> };

const caches = new WeakMap<object, ParseCaches>();

/** The tokens of a parsed document, read from its token list (its text's length without one: never fewer). */
function tokensOf(document: DocumentNode, text: string): number {
  let token: Token | null | undefined = document.loc?.startToken;
  if (!token) return text.length;
  let n = 0;
  for (; token; token = token.next) n++;
  return n;
}

function documentBytes(document: DocumentNode, text: string): number {
  return Math.max(1, BYTES_PER_TOKEN * tokensOf(document, text) + BYTES_PER_CHAR * text.length);
}

export function parseCaches(): ParseCaches {
  return {
    documentCache: new LRUCache<string, DocumentNode>({
      max: MAX_ENTRIES,
      ttl: TTL_MS,
      maxSize: DOCUMENT_CACHE_BYTES,
      sizeCalculation: documentBytes,
    }),
    errorCache: new LRUCache<string, object>({
      max: MAX_ENTRIES,
      ttl: TTL_MS,
      maxSize: ERROR_CACHE_CHARS,
      sizeCalculation: (_error, text) => Math.max(1, text.length),
    }),
  };
}

/** The caches of the GraphQL endpoint built with these dependencies (src/graphql/yoga.ts), for tests. */
export function parseCachesOf(deps: object): ParseCaches | undefined {
  return caches.get(deps);
}

export function keepParseCaches(deps: object, c: ParseCaches): ParseCaches {
  caches.set(deps, c);
  return c;
}
