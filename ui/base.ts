// The path the gateway is served under behind a reverse proxy that strips it ("/auth" for
// LINKGATE_ISSUER=https://example.com/auth; "" at the root), written into each page by the
// server: every address a page fetches or goes to starts with it (docs/operations.md, "Behind a
// reverse proxy").

/** A path of segments, or nothing: anything else in the tag is not the server's. */
const BASE = /^(\/[^/?#\\]+)*$/;

export function basePath(): string {
  // outside a page (the rules of the pages' scripts are tested in Node) there is no prefix
  if (typeof document === "undefined") return "";
  const value = document.querySelector<HTMLMetaElement>('meta[name="linkgate-base-path"]')?.content ?? "";
  return BASE.test(value) ? value : "";
}

/** `path` (starting with /) as the browser must ask for it. */
export const at = (path: string): string => `${basePath()}${path}`;
